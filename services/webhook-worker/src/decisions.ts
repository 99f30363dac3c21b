import { DelayedError } from 'bullmq';
import type { Logger } from 'pino';
import type { WebhookJobData, WorkerJob } from '../../../shared/queue';
import type { DeliveryStore } from './delivery-store';

/** The job's id, which is its delivery's id: the lease token of its gate lease. */
export function jobIdOf(job: WorkerJob): string {
  return job.id ?? job.data.deliveryId;
}

/** What the job's data and priority become as it goes back to the delayed set. */
interface JobChanges {
  /** The job's new data (its gate key, a reserved rate slot), replacing the old. */
  data?: WebhookJobData;
  /** The job's BullMQ priority from now on (kept across the delayed set). */
  priority?: number;
}

/**
 * What one step of an attempt decided (docs/design.md §6.3); only
 * {@link createDecisionApplier}'s `apply` turns it into a change of the job and the row.
 * - `send`: go on to the next step;
 * - `park`: wait in the delayed set until `until` (ms since the epoch) for whoever holds what
 *   the job waits for (a gate lease, the delivery ahead in a FIFO line) to wake it; once
 *   parked, `recheck` says whether that already went (then the job wakes itself);
 * - `postpone`: wait in the delayed set until `at`, without an attempt unless one was recorded;
 * - `fail`: fail the delivery without an attempt, `reason` its `last_error`;
 * - `done`: nothing more to do for this job.
 * A park or postpone of a claimed delivery unclaims it first.
 */
export type Decision =
  | { kind: 'send' }
  | ({ kind: 'park'; until: number; recheck: () => Promise<boolean> } & JobChanges)
  | ({ kind: 'postpone'; at: number } & JobChanges)
  | { kind: 'fail'; reason: string }
  | { kind: 'done' };

/** A decision that ends the step chain (all but `send`). */
export type Outcome = Exclude<Decision, { kind: 'send' }>;

/** The job a decision is applied to, and what its attempt holds. */
export interface Applied {
  job: WorkerJob;
  /** BullMQ's lock token of the running job (undefined outside a worker, as BullMQ allows). */
  lockToken: string | undefined;
  /** The delivery id this attempt claimed and still holds `delivering`, if any. */
  claimed: string | undefined;
  /** Where the job's partition is, for a wake of its own. */
  shard: number;
  log: Logger;
}

export interface DecisionApplierOptions {
  store: DeliveryStore;
  /** Makes these parked jobs runnable now; `partition` is where to look first. */
  wake(deliveryIds: string[], shard: number): Promise<void>;
}

/**
 * The one place where an attempt's decision becomes a change of its BullMQ job and delivery
 * row, as a job library's engine applies what a job returns. A job moved to the delayed set
 * ends its run with BullMQ's DelayedError (the job was postponed, not failed).
 *
 * A park is done in two steps (the delayed set, then the recheck), so that whoever frees what
 * the job waits for between its decision and its move, and finds it still running, is not
 * lost: the recheck sees it and the job wakes itself.
 *
 * @returns `apply(decision, applied)`, which resolves for `fail` and `done` and rejects with
 *   DelayedError for `park` and `postpone`, once applied; the store's and Redis' errors reject as they are
 */
export function createDecisionApplier(options: DecisionApplierOptions): (decision: Outcome, applied: Applied) => Promise<void> {
  const { store } = options;

  async function moveBack(job: WorkerJob, lockToken: string | undefined, claimed: string | undefined, at: number, changes: JobChanges): Promise<void> {
    if (claimed !== undefined) await store.unclaim(claimed);
    if (changes.data) await job.updateData(changes.data);
    if (changes.priority !== undefined && job.priority !== changes.priority) await job.changePriority({ priority: changes.priority });
    await job.moveToDelayed(Math.round(at), lockToken);
  }

  return async function apply(decision, { job, lockToken, claimed, shard, log }) {
    switch (decision.kind) {
      case 'done':
        return;
      case 'fail':
        await store.failWithoutAttempt(job.data.deliveryId, decision.reason);
        log.warn({ reason: decision.reason }, 'delivery failed without an attempt');
        return;
      case 'postpone':
        await moveBack(job, lockToken, claimed, decision.at, decision);
        throw new DelayedError();
      case 'park':
        await moveBack(job, lockToken, claimed, decision.until, decision);
        try {
          if (await decision.recheck()) await options.wake([job.data.deliveryId], shard);
        } catch (error) {
          log.warn({ err: error }, 'could not check a parked job again; it runs when its parking ends');
        }
        throw new DelayedError();
    }
  };
}
