import { DelayedError, Job } from 'bullmq';
import type { WebhookJobData, WebhookJobName } from '../../../shared/queue';

/** A delivery job as the worker's processor handles it. */
export type DeliveryJob = Job<WebhookJobData, void, WebhookJobName>;

/**
 * Moves the running job back to the delayed set until `at` (ms since the epoch), without an
 * attempt (BullMQ "Manually move a job to delayed").
 * @throws DelayedError always, once moved: BullMQ's signal that the job was postponed, not failed
 */
export async function postpone(job: DeliveryJob, token: string | undefined, at: number): Promise<never> {
  await job.moveToDelayed(Math.round(at), token);
  throw new DelayedError();
}

/** The job's id, which is its delivery's id: the token of its gate lease. */
export function jobIdOf(job: DeliveryJob): string {
  return job.id ?? job.data.deliveryId;
}

/**
 * How long to wait during an outage that has lasted `downForMs` so far: as long again, within
 * `bounds` (ms), so a short outage costs little and a long one does not spin.
 */
export function outageWaitMs(downForMs: number, bounds: { min: number; max: number }): number {
  return Math.min(bounds.max, Math.max(bounds.min, downForMs));
}

/** Uniform in [low, high), drawn from `random` (uniform in [0, 1)). */
export function between(random: () => number, [low, high]: readonly [number, number]): number {
  return low + (high - low) * random();
}
