import type { Logger } from 'pino';
import type { Config } from '../../../shared/config';
import type { Metrics } from '../../../shared/metrics';
import { RETRY_PRIORITY, partitionOfQueueName } from '../../../shared/queue';
import type { AttemptVerdict } from '../../../shared/endpoint-gate';
import { Lease, createAdmission } from './admission';
import type { JobScope, PartitionGates } from './job-scope';
import { ClaimedDelivery, DeliveryStore, postponesAttempt } from './delivery-store';
import { createFifoLine } from './fifo-line';
import type { HttpSender } from './http-sender';
import { DeliveryJob, between, jobIdOf, outageWaitMs, postpone } from './job-moves';
import type { RetryPolicy } from './retry-policy';
import { createSendAttempt } from './send-attempt';

export type { PartitionGates } from './job-scope';
export type { DeliveryJob } from './job-moves';

export interface DeliveryProcessorOptions {
  config: Pick<Config, 'appKey' | 'webhookSalt' | 'workerConcurrency' | 'webhookTimeoutMs'>;
  store: DeliveryStore;
  sender: HttpSender;
  policy: RetryPolicy;
  /**
   * The endpoint gate and rate limiter of a queue partition (their keys live in it): a job
   * always uses those of the partition it sits in (docs/design.md §13).
   */
  gates(partition: number): PartitionGates;
  logger: Logger;
  metrics?: Metrics;
  /** Queues deliveries the worker itself recorded (operational events, docs/design.md §6 rev 4); must not throw. */
  queueNotices(deliveryIds: string[]): Promise<void>;
  /**
   * Makes the parked jobs of these deliveries runnable now (out of the delayed set, or added
   * again when Redis lost them): a FIFO endpoint's next in line, once the one ahead ended, and
   * the jobs a gate release woke. `partition` is where to look first: the waking job's.
   */
  wake(deliveryIds: string[], partition: number): Promise<void>;
  /** Uniform in [0, 1); tests pin it. */
  random?: () => number;
}

/** One job's run: the lease it holds, how its attempt counts, and the FIFO delivery to wake after it. */
interface Turn {
  lease?: Lease;
  verdict: AttemptVerdict;
  next: string | null;
}

/** Why a claimed delivery fails without an attempt. */
type Unsendable = 'endpoint deleted' | 'endpoint disabled' | 'event missing';

/**
 * Why the delivery cannot be sent, or null: its endpoint deleted (it must not be signed with
 * the derived secret) or disabled, or its event row missing (docs/design.md §3: never an empty signed
 * body in place of the event's bytes).
 */
function unsendableFor(delivery: ClaimedDelivery): Unsendable | null {
  if (delivery.endpointDeleted && delivery.secret === null) return 'endpoint deleted';
  if (delivery.endpointActive === false) return 'endpoint disabled';
  return delivery.body === null ? 'event missing' : null;
}

/** Share of a worker's slots retries may hold, so first attempts always find free slots. */
const RETRY_SHARE = 0.8;
/** A retry over that share waits this long, jittered: a local limit, freed within an attempt. */
const RETRY_SLOT_WAIT_MS: [number, number] = [100, 500];
/**
 * PostgreSQL unreachable: postpone by as long as it has been away so far, at least 0.5 s and
 * at most 15 s, so a short outage costs little and a long one does not spin.
 */
const DATABASE_BACKOFF_MS = { min: 500, max: 15_000 };

/**
 * The BullMQ processor: one attempt per run (docs/design.md §6), in three steps, each in its own file:
 * admission (admission.ts: the endpoint's gate and rate slot, asked before the claim when the
 * job knows its gate key and after it otherwise), the FIFO line (fifo-line.ts: a delivery not
 * at its line's head waits its turn; only the head asks the gate), and the attempt
 * (send-attempt.ts: sign, send, record, metrics). Between them it claims the delivery (one
 * query) and fails without an attempt one that cannot be sent. A retry moves this same job to
 * the delayed set until the next attempt is due, so the retry count lives in PostgreSQL and
 * survives Redis losing its data. Deferred jobs and retries are prioritized, so fresh first
 * attempts run ahead of them, and retries hold at most 80% of the slots. While PostgreSQL is
 * unreachable the job waits (backing off) without using an attempt.
 *
 * @throws DelayedError after postponing the job (BullMQ's signal, not a failure); other
 *   database errors, which fail the job and let BullMQ retry it
 */
export function createDeliveryProcessor(options: DeliveryProcessorOptions) {
  const { store, logger, config } = options;
  const random = options.random ?? Math.random;
  const admission = createAdmission({ store, logger, wake: options.wake, queueNotices: options.queueNotices, random });
  const line = createFifoLine({ store, wake: options.wake });
  const sendAttempt = createSendAttempt({ ...options, random });
  const retrySlots = Math.max(1, Math.floor(config.workerConcurrency * RETRY_SHARE));
  let retriesInFlight = 0;
  let databaseDownSince: number | undefined;

  async function attempt(job: DeliveryJob, token: string | undefined, scope: JobScope, log: Logger): Promise<void> {
    const turn: Turn = { verdict: 'neutral', next: null };
    try {
      turn.lease = await admission.beforeClaim(job, token, scope);
      const delivery = await store.claim(job.data.deliveryId, job.name === 'redeliver');
      databaseDownSince = undefined;
      if (!delivery) return await line.waitTurn(job, token, scope, turn.lease?.gateKey, log);
      const unsendable = unsendableFor(delivery);
      if (unsendable !== null || delivery.body === null) {
        await failUnsendable(delivery, unsendable ?? 'event missing', log);
        if (unsendable !== 'endpoint deleted') turn.next = await line.nextAfter(delivery, log);
        return;
      }
      await admission.afterClaim(job, token, scope, delivery, turn, log);
      const outcome = await sendAttempt(delivery, delivery.body, log, () => admission.startAgain(scope, delivery, jobIdOf(job)));
      turn.verdict = outcome.verdict;
      if (turn.lease) turn.lease.originEpoch = outcome.originEpoch;
      if (outcome.retryAt === null) {
        turn.next = await line.nextAfter(delivery, log);
        return;
      }
      // Priority is per job and kept across the delayed set: set once, on the first retry.
      if (outcome.attempted && job.priority !== RETRY_PRIORITY) await job.changePriority({ priority: RETRY_PRIORITY });
      return await postpone(job, token, outcome.retryAt);
    } catch (error) {
      if (!postponesAttempt(error)) throw error;
      databaseDownSince ??= Date.now();
      const delayMs = outageWaitMs(Date.now() - databaseDownSince, DATABASE_BACKOFF_MS);
      log.warn({ err: error, delayMs }, 'database unreachable; attempt postponed without counting');
      return await postpone(job, token, Date.now() + delayMs * between(random, [0.8, 1.2]));
    } finally {
      // The release records the next as the line's head before it wakes, so it asks as the head.
      if (turn.lease) await admission.release(scope, turn.lease, jobIdOf(job), turn.verdict, turn.next, log);
      if (turn.next) await line.wake(turn.next, scope, log);
    }
  }

  /** Fails a delivery that cannot be sent, without an attempt (its `last_error` is the reason). */
  async function failUnsendable(delivery: ClaimedDelivery, reason: Unsendable, log: Logger): Promise<void> {
    await store.failWithoutAttempt(delivery.id, reason);
    if (reason === 'event missing') log.error('event row missing; delivery failed without an attempt');
    else log.warn({ endpointId: delivery.endpointId }, `${reason}; delivery failed without an attempt`);
  }

  return async function processDelivery(job: DeliveryJob, token?: string): Promise<void> {
    const log = logger.child({ deliveryId: job.data.deliveryId });
    const retry = job.priority === RETRY_PRIORITY;
    if (retry && retriesInFlight >= retrySlots) return postpone(job, token, Date.now() + between(random, RETRY_SLOT_WAIT_MS));
    if (retry) retriesInFlight += 1;
    const partition = partitionOfQueueName(job.queueName);
    try {
      return await attempt(job, token, { partition, ...options.gates(partition) }, log);
    } finally {
      if (retry) retriesInFlight -= 1;
    }
  };
}
