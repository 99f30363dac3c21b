import type { Logger } from 'pino';
import { isTransactionConflict } from '../../../shared/db';
import { shownUrl } from '../../../shared/http/url-display';
import type { Metrics } from '../../../shared/metrics';
import type { AttemptVerdict } from '../../../shared/endpoint-gate';
import { postponesAttempt, type AttemptRecord, type ClaimedDelivery, type DeliveryStore, type RecordResult } from './delivery-store';
import type { DeliveryOutcome } from './destinations';
import type { RetryPolicy } from './retry-policy';
import { between, outageWaitMs } from './waits';

/**
 * PostgreSQL unreachable after the endpoint answered: the record is tried again after as long
 * as the outage has lasted so far, at least 0.25 s and at most 2 s. Shorter than a postponed
 * claim's wait: this job holds a slot, its endpoint lease and maybe its FIFO line meanwhile.
 */
const RECORD_RETRY_MS = { min: 250, max: 2_000 };
/** How many times a record that lost a deadlock or serialization conflict is tried in all. */
const RECORD_CONFLICT_TRIES = 5;

/** What a recorded attempt came to, for the job. */
export interface RecordedAttempt {
  /** How it counts for the endpoint's circuit. */
  verdict: AttemptVerdict;
  /** When the next attempt is due (ms since the epoch), or null: the delivery ended. */
  retryAt: number | null;
  /**
   * The endpoint's origin epoch to report with the verdict: the record's, which is newer than
   * the attempt's when the endpoint moved to another origin meanwhile (the verdict is then
   * `neutral`, and the circuit of the old origin is reset); null: unknown, or no endpoint.
   */
  originEpoch: number | null;
}

export interface AttemptRecorderOptions {
  store: DeliveryStore;
  policy: RetryPolicy;
  metrics?: Metrics;
  /** Queues deliveries the worker itself recorded (`endpoint.disabled` notices); must not throw. */
  queueNotices(deliveryIds: string[]): Promise<void>;
  /** Uniform in [0, 1); tests pin it. */
  random: () => number;
}

/**
 * The record of an attempt (docs/design.md §6.3, step 4), whatever
 * its destination: the retry policy's decision on the outcome, the attempt and the delivery's
 * new state in one statement (grouped with the concurrent jobs' records), the endpoint's
 * notices, the metrics and the log.
 *
 * @returns `(delivery, outcome, log)`, resolving to what the attempt came to
 * @throws the store's errors (the delivery gone meanwhile, a conflict that persists);
 *   PostgreSQL away is waited out, and the attempt recorded then
 */
export function createAttemptRecorder(options: AttemptRecorderOptions): (delivery: ClaimedDelivery, outcome: Exclude<DeliveryOutcome, { kind: 'unsent' }>, log: Logger) => Promise<RecordedAttempt> {
  const { store, policy, metrics, random } = options;

  /**
   * Records an attempt the endpoint already has (docs/design.md §13.3): sending it again would
   * hand the receiver a duplicate to absorb. A PostgreSQL outage is waited out; a record that
   * lost a deadlock or a serialization conflict to another transaction runs again, up to
   * {@link RECORD_CONFLICT_TRIES} times. The record is idempotent (an attempt number written
   * once, the delivery's state set, not counted up), so a try whose commit went through
   * unanswered does no harm when repeated. Only a worker that dies meanwhile leaves the
   * attempt to be sent again (at least once).
   * @throws the store's other errors (the delivery gone meanwhile), and a conflict that persists
   */
  async function recordWhenBack(record: AttemptRecord, log: Logger): Promise<RecordResult> {
    let downSince: number | undefined;
    let conflicts = 0;
    for (;;) {
      try {
        return await store.recordAttempt(record);
      } catch (error) {
        const now = Date.now();
        let delayMs: number;
        if (postponesAttempt(error)) {
          if (downSince === undefined) log.warn({ err: error }, 'attempt sent, but PostgreSQL is unreachable: it is recorded once PostgreSQL is back');
          downSince ??= now;
          delayMs = outageWaitMs(now - downSince, RECORD_RETRY_MS);
        } else if (isTransactionConflict(error) && conflicts < RECORD_CONFLICT_TRIES - 1) {
          conflicts += 1;
          log.warn({ err: error, conflicts }, 'attempt record lost a conflict with another transaction; recording it again');
          delayMs = RECORD_RETRY_MS.min;
        } else throw error;
        await new Promise((resolve) => setTimeout(resolve, delayMs * between(random, [0.8, 1.2])));
      }
    }
  }

  return async function recordAttempt(delivery, outcome, log) {
    const attemptNumber = delivery.attempts + 1;
    const failed = outcome.kind === 'failed' ? outcome : undefined;
    const decision = failed
      ? // An overloaded destination (a timeout, 429) waits as the policy makes a timeout wait.
        policy.decide(attemptNumber, { statusCode: failed.status, timedOut: failed.overloaded, retryAfterMs: failed.retryAfterMs, blocked: !failed.retryable }, { oneShot: delivery.oneShot })
      : ({ kind: 'succeeded' } as const);
    const error = failed?.error ?? null;
    const nextAttemptAt = decision.kind === 'retry' ? new Date(Date.now() + decision.delayMs) : null;
    const gone = decision.kind === 'failed' && decision.disableEndpoint && delivery.endpointId !== null;
    const recorded = await recordWhenBack({
      deliveryId: delivery.id,
      deliveryCreatedAt: delivery.createdAt,
      attemptNumber,
      url: delivery.url,
      originEpoch: delivery.originEpoch,
      statusCode: outcome.status,
      error,
      durationMs: outcome.durationMs,
      response: outcome.excerpt,
      status: decision.kind === 'retry' ? 'pending' : decision.kind,
      nextAttemptAt,
      endpointId: delivery.endpointId,
      succeeded: decision.kind === 'succeeded',
      goneReason: gone ? `410 Gone from ${shownUrl(delivery.url)} at ${new Date().toISOString()}` : null,
      // Every attempt used; a redelivery or recovery (one shot) was the operator's own try.
      exhausted: decision.kind === 'failed' && !decision.disableEndpoint && !delivery.oneShot && attemptNumber >= policy.maxAttempts,
      inLine: delivery.sequence !== null && !delivery.oneShot,
    }, log);
    if (recorded.disabledReason !== null) {
      log.warn({ endpointId: delivery.endpointId, reason: recorded.disabledReason }, 'endpoint disabled');
      metrics?.endpointsDisabled.inc();
    }
    if (recorded.noticeIds.length > 0) await options.queueNotices(recorded.noticeIds);
    metrics?.deliveries.inc({ outcome: gone ? 'disabled' : decision.kind === 'retry' ? 'retried' : decision.kind });
    metrics?.attemptDuration.observe({ status_class: statusClass(outcome.status) }, outcome.durationMs / 1000);

    const fields = { attempt: attemptNumber, statusCode: outcome.status, durationMs: outcome.durationMs };
    if (decision.kind === 'succeeded') log.info(fields, 'delivered');
    else if (decision.kind === 'failed') log.warn({ ...fields, error, endpointDisabled: gone }, 'delivery failed; no more attempts');
    else log.info({ ...fields, error, nextAttemptAt }, 'attempt failed; retry scheduled');
    // An answer from an origin the endpoint left while the attempt ran says nothing of the endpoint.
    const moved = recorded.originEpoch !== null && recorded.originEpoch !== delivery.originEpoch;
    const verdict: AttemptVerdict = moved ? 'neutral' : outcome.kind === 'succeeded' ? 'success' : outcome.unhealthy ? 'failure' : 'neutral';
    return { verdict, retryAt: nextAttemptAt?.getTime() ?? null, originEpoch: recorded.originEpoch ?? delivery.originEpoch };
  };
}

function statusClass(statusCode: number | null): string {
  return statusCode === null ? 'error' : `${Math.floor(statusCode / 100)}xx`;
}
