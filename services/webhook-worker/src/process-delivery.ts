import type { Logger } from 'pino';
import type { Config } from '../../../shared/config';
import type { AttemptVerdict } from '../../../shared/endpoint-gate';
import type { Metrics } from '../../../shared/metrics';
import { RETRY_PRIORITY, type WorkerJob, shardOfQueueName } from '../../../shared/queue';
import { Lease, admittedToSend, createAdmission } from './admission';
import { Outcome, createDecisionApplier } from './decisions';
import type { JobScope, ShardGates } from './job-scope';
import { ClaimedDelivery, DeliveryStore, postponesAttempt } from './delivery-store';
import type { Destinations } from './destinations';
import { createFifoLine } from './fifo-line';
import { createAttemptRecorder } from './record-attempt';
import type { RetryPolicy } from './retry-policy';
import { signedMessageOf } from './sign-delivery';
import { between, outageWaitMs } from './waits';

export type { ShardGates } from './job-scope';

export interface DeliveryProcessorOptions {
  config: Pick<Config, 'appKey' | 'webhookSalt' | 'workerConcurrency'>;
  store: DeliveryStore;
  /** Where deliveries go, by their endpoint's type. */
  destinations: Destinations;
  policy: RetryPolicy;
  /**
   * The endpoint gate and rate limiter of a queue partition (their keys live in it): a job
   * always uses those of the partition it sits in (docs/design.md §13.1).
   */
  gates(shard: number): ShardGates;
  logger: Logger;
  metrics?: Metrics;
  /** Queues deliveries the worker itself recorded (operational events, docs/design.md §6.6); must not throw. */
  queueNotices(deliveryIds: string[]): Promise<void>;
  /**
   * Makes the parked jobs of these deliveries runnable now (out of the delayed set, or added
   * again when Redis lost them): a FIFO endpoint's next in line, once the one ahead ended, and
   * the jobs a gate release woke. `partition` is where to look first: the waking job's.
   */
  wake(deliveryIds: string[], shard: number): Promise<void>;
  /** Uniform in [0, 1); tests pin it. */
  random?: () => number;
}

/**
 * Why the delivery cannot be sent, or null: its endpoint deleted (it must not be signed with
 * the derived secret) or disabled, or its event row missing (docs/design.md §3.5: never an empty signed
 * body in place of the event's bytes).
 */
function unsendableFor(delivery: ClaimedDelivery): 'endpoint deleted' | 'endpoint disabled' | 'event missing' | null {
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
 * The BullMQ processor: one attempt per run (docs/design.md §6.3).
 * `attempt` reads as its steps: admission (admission.ts: the endpoint's gate and rate slot,
 * asked before the claim when the job knows its gate key and after it otherwise), the FIFO
 * line (fifo-line.ts: a delivery not at its line's head waits its turn), the claim, the
 * signature, the send through the destination of the endpoint's type (destinations/), the
 * record (record-attempt.ts) and the decision on what follows. Each step that stops the
 * attempt returns a decision, and only the applier (decisions.ts) moves the job or writes the
 * row for it; the lease admission hands back is returned in one place, with the attempt's
 * verdict and the FIFO line's next delivery, which is then woken. A retry moves this same job
 * to the delayed set until the next attempt is due, so the retry count lives in PostgreSQL
 * and survives Redis losing its data. Deferred jobs and retries are prioritized, so fresh
 * first attempts run ahead of them, and retries hold at most 80% of the slots. While
 * PostgreSQL is unreachable the job waits (backing off) without using an attempt.
 *
 * @throws DelayedError after postponing the job (BullMQ's signal, not a failure); other
 *   database errors, which fail the job and let BullMQ retry it
 */
export function createDeliveryProcessor(options: DeliveryProcessorOptions) {
  const { store, logger, config, destinations } = options;
  const random = options.random ?? Math.random;
  const admission = createAdmission({ store, logger, wake: options.wake, queueNotices: options.queueNotices, random });
  const line = createFifoLine({ store, wake: options.wake });
  const record = createAttemptRecorder({ store, policy: options.policy, metrics: options.metrics, queueNotices: options.queueNotices, random });
  const apply = createDecisionApplier({ store, wake: options.wake });
  const retrySlots = Math.max(1, Math.floor(config.workerConcurrency * RETRY_SHARE));
  let retriesInFlight = 0;
  let databaseDownSince: number | undefined;

  /** PostgreSQL is away: the job waits as long as the outage has lasted, without an attempt. */
  function databaseDown(error: unknown, log: Logger): Outcome {
    databaseDownSince ??= Date.now();
    const delayMs = outageWaitMs(Date.now() - databaseDownSince, DATABASE_BACKOFF_MS);
    log.warn({ err: error, delayMs }, 'database unreachable; attempt postponed without counting');
    return { kind: 'postpone', at: Date.now() + delayMs * between(random, [0.8, 1.2]) };
  }

  async function attempt(job: WorkerJob, lockToken: string | undefined, scope: JobScope, log: Logger): Promise<void> {
    let lease: Lease | undefined;
    let verdict: AttemptVerdict = 'neutral';
    /** The delivery claimed, whose end moves its FIFO line on. */
    let delivery: ClaimedDelivery | null = null;
    /** Whether the attempt still holds it `delivering` (a park or postponement gives it back). */
    let holdsClaim = false;
    /** The FIFO line's next delivery, once this one ended. */
    let next: string | null = null;

    async function steps(): Promise<Outcome> {
      const before = await admission.beforeClaim(job, scope);
      lease = before.lease;
      if (before.decision.kind !== 'send') return before.decision;

      delivery = await store.claim(job.data.deliveryId, job.name === 'redeliver');
      databaseDownSince = undefined;
      if (!delivery) return line.waitTurn(job, scope, lease?.gateKey, log);
      const claimed = delivery;
      const unsendable = unsendableFor(claimed);
      if (unsendable !== null || claimed.body === null) return { kind: 'fail', reason: unsendable ?? 'event missing' };
      holdsClaim = true;

      const after = await admission.afterClaim(job, scope, claimed, lease);
      lease = after.lease;
      if (!admittedToSend(after)) return after.decision.kind === 'send' ? { kind: 'done' } : after.decision;

      let message;
      try {
        message = signedMessageOf(claimed, claimed.body, config);
      } catch (error) {
        log.error({ err: error }, 'cannot sign the delivery; failed without an attempt');
        return { kind: 'fail', reason: `cannot sign: ${(error as Error).message}` };
      }
      const outcome = await destinations.of(claimed.type).send(message, { admitAnother: () => admission.startAgain(scope, claimed, after.lease), log });
      if (outcome.kind === 'unsent') return { kind: 'postpone', at: Date.now() + outcome.waitMs };

      const recorded = await record(claimed, outcome, log);
      holdsClaim = false;
      verdict = recorded.verdict;
      lease = { ...after.lease, originEpoch: recorded.originEpoch };
      if (recorded.retryAt === null) return { kind: 'done' };
      // Priority is per job and kept across the delayed set: set once, on the first retry.
      return { kind: 'postpone', at: recorded.retryAt, priority: RETRY_PRIORITY };
    }

    try {
      let decision: Outcome;
      try {
        decision = await steps();
      } catch (error) {
        if (!postponesAttempt(error)) throw error;
        decision = databaseDown(error, log);
        holdsClaim = false;
      }
      const applied = { job, lockToken, shard: scope.shard, log };
      try {
        await apply(decision, { ...applied, claimed: holdsClaim ? job.data.deliveryId : undefined });
      } catch (error) {
        if (!postponesAttempt(error)) throw error;
        return await apply(databaseDown(error, log), { ...applied, claimed: undefined });
      }
      // Decide next: a delivery that ended (not for its deleted endpoint) lets its line move on.
      const ended = decision.kind === 'done' || (decision.kind === 'fail' && decision.reason !== 'endpoint deleted');
      if (ended && delivery) next = await line.nextAfter(delivery, log);
    } finally {
      // The release records the next as the line's head before it wakes, so it asks as the head.
      if (lease) await admission.release(scope, lease, verdict, next, log);
      if (next) await line.wake(next, scope, log);
    }
  }

  return async function processDelivery(job: WorkerJob, lockToken?: string): Promise<void> {
    const log = logger.child({ deliveryId: job.data.deliveryId });
    const retry = job.priority === RETRY_PRIORITY;
    const shard = shardOfQueueName(job.queueName);
    if (retry && retriesInFlight >= retrySlots) {
      return apply({ kind: 'postpone', at: Date.now() + between(random, RETRY_SLOT_WAIT_MS) }, { job, lockToken, claimed: undefined, shard, log });
    }
    if (retry) retriesInFlight += 1;
    try {
      return await attempt(job, lockToken, { shard, ...options.gates(shard) }, log);
    } finally {
      if (retry) retriesInFlight -= 1;
    }
  };
}
