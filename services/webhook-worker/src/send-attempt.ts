import type { Logger } from 'pino';
import type { Config } from '../../../shared/config';
import { isTransactionConflict } from '../../../shared/db';
import { shownUrl } from '../../../shared/http/url-display';
import type { Metrics } from '../../../shared/metrics';
import type { AttemptVerdict } from '../../../shared/endpoint-gate';
import { createAuthorizedSend } from './authorized-send';
import { postponesAttempt, type AttemptRecord, type ClaimedDelivery, type DeliveryStore, type RecordResult } from './delivery-store';
import type { HttpSender, SendResult } from './http-sender';
import { between, outageWaitMs } from './job-moves';
import { createOAuth2Tokens } from './oauth2-tokens';
import type { RetryPolicy } from './retry-policy';
import { signDelivery } from './sign-delivery';

/**
 * The egress proxy refusing the worker's credentials (407) is the operator's outage: the
 * delivery waits as long as the outage has lasted so far, at least 1 s and at most 60 s, and
 * the error is logged at most this often per process (docs/design.md §14, Egress).
 */
const PROXY_BACKOFF_MS = { min: 1_000, max: 60_000 };
const PROXY_OUTAGE_LOG_EVERY_MS = 30_000;
/**
 * PostgreSQL unreachable after the endpoint answered: the record is tried again after as long
 * as the outage has lasted so far, at least 0.25 s and at most 2 s. Shorter than a postponed
 * claim's wait: this job holds a slot, its endpoint lease and maybe its FIFO line meanwhile.
 */
const RECORD_RETRY_MS = { min: 250, max: 2_000 };
/** How many times a record that lost a deadlock or serialization conflict is tried in all. */
const RECORD_CONFLICT_TRIES = 5;

/** What one attempt came to, for the job. */
export interface AttemptResult {
  /** How it counts for the endpoint's circuit. */
  verdict: AttemptVerdict;
  /** When the next attempt is due (ms since the epoch), or null: the delivery ended. */
  retryAt: number | null;
  /** False when no attempt was made (the egress proxy refused the worker's credentials: the delivery waits, unclaimed). */
  attempted: boolean;
  /**
   * The endpoint's origin epoch to report with the verdict: the record's, which is newer than
   * the attempt's when the endpoint moved to another origin meanwhile (the verdict is then
   * `neutral`, and the circuit of the old origin is reset); null: unknown, or no endpoint.
   */
  originEpoch: number | null;
}

export interface SendAttemptOptions {
  config: Pick<Config, 'appKey' | 'webhookSalt' | 'webhookTimeoutMs'>;
  store: DeliveryStore;
  sender: HttpSender;
  policy: RetryPolicy;
  metrics?: Metrics;
  /** Queues deliveries the worker itself recorded (`endpoint.disabled` notices); must not throw. */
  queueNotices(deliveryIds: string[]): Promise<void>;
  /** Uniform in [0, 1); tests pin it. */
  random: () => number;
}

/**
 * The attempt itself (docs/design.md §6, "The worker, per attempt"): signs the stored body with a
 * fresh timestamp and the stable webhook-id, sends it with the endpoint's credentials
 * (authorized-send.ts: its OAuth2 token, from this process's cache, and its client
 * certificate), records the attempt with the delivery's new state (one statement), and counts
 * it in the metrics. A delivery that cannot be signed fails without an attempt.
 *
 * @returns `(delivery, body, log, resendSlot)`: sends `body`, the delivery's bytes;
 *   `resendSlot` admits a second request within the endpoint's rate limit (a 401 resent with a fresh token)
 * @throws the store's errors (PostgreSQL away before the send, the delivery gone meanwhile);
 *   PostgreSQL away after the send is waited out, and the attempt recorded then
 */
export function createSendAttempt(
  options: SendAttemptOptions,
): (delivery: ClaimedDelivery, body: string, log: Logger, resendSlot: () => Promise<void>) => Promise<AttemptResult> {
  const { config, store, sender, policy, metrics, random } = options;
  const authorizedSend = createAuthorizedSend({ sender, tokens: createOAuth2Tokens({ sender, timeoutMs: config.webhookTimeoutMs }), timeoutMs: config.webhookTimeoutMs });
  let proxyRefusedSince: number | undefined;
  let proxyOutageLoggedAt = 0;

  /**
   * The egress proxy refused the worker's credentials (407): unclaims the delivery, which then
   * waits without an attempt, and says so loudly.
   * @returns when to try again, ms since the epoch
   */
  async function waitForProxy(delivery: ClaimedDelivery, log: Logger): Promise<number> {
    await store.unclaim(delivery.id);
    const now = Date.now();
    proxyRefusedSince ??= now;
    const delayMs = outageWaitMs(now - proxyRefusedSince, PROXY_BACKOFF_MS) * between(random, [0.8, 1.2]);
    const fields = { refusedForMs: now - proxyRefusedSince, delayMs: Math.round(delayMs) };
    const message = 'egress proxy answered 407: WEBHOOK_PROXY_URL credentials refused; deliveries wait without using attempts';
    if (now - proxyOutageLoggedAt >= PROXY_OUTAGE_LOG_EVERY_MS) {
      proxyOutageLoggedAt = now;
      log.error(fields, message);
    } else log.debug(fields, message);
    return now + delayMs;
  }

  /**
   * Records an attempt the endpoint already has (docs/design.md §13): sending it again would
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

  return async function sendAttempt(delivery, bytes, log, resendSlot) {
    let headers: Record<string, string>;
    const body = Buffer.from(bytes, 'utf8');
    try {
      headers = signDelivery(delivery, body, config);
    } catch (error) {
      await store.failWithoutAttempt(delivery.id, `cannot sign: ${(error as Error).message}`);
      log.error({ err: error }, 'cannot sign the delivery; failed without an attempt');
      return { verdict: 'neutral', retryAt: null, attempted: false, originEpoch: delivery.originEpoch };
    }

    const attemptNumber = delivery.attempts + 1;
    const result = await authorizedSend(delivery, { url: delivery.url, method: delivery.method, body, headers }, resendSlot, log);
    if (result.proxyUnauthorized) return { verdict: 'neutral', retryAt: await waitForProxy(delivery, log), attempted: false, originEpoch: delivery.originEpoch };
    proxyRefusedSince = undefined;
    const decision = policy.decide(attemptNumber, result, { oneShot: delivery.oneShot });
    const nextAttemptAt = decision.kind === 'retry' ? new Date(Date.now() + decision.delayMs) : null;
    const gone = decision.kind === 'failed' && decision.disableEndpoint && delivery.endpointId !== null;
    const recorded = await recordWhenBack({
      deliveryId: delivery.id,
      deliveryCreatedAt: delivery.createdAt,
      attemptNumber,
      url: delivery.url,
      originEpoch: delivery.originEpoch,
      statusCode: result.statusCode,
      error: result.error,
      durationMs: result.durationMs,
      response: result.response,
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
    metrics?.attemptDuration.observe({ status_class: statusClass(result.statusCode) }, result.durationMs / 1000);

    const fields = { attempt: attemptNumber, statusCode: result.statusCode, durationMs: result.durationMs };
    if (decision.kind === 'succeeded') log.info(fields, 'delivered');
    else if (decision.kind === 'failed') log.warn({ ...fields, error: result.error, endpointDisabled: gone }, 'delivery failed; no more attempts');
    else log.info({ ...fields, error: result.error, nextAttemptAt }, 'attempt failed; retry scheduled');
    // An answer from an origin the endpoint left while the attempt ran says nothing of the endpoint.
    const moved = recorded.originEpoch !== null && recorded.originEpoch !== delivery.originEpoch;
    const verdict = moved ? 'neutral' : circuitVerdict(result);
    return { verdict, retryAt: nextAttemptAt?.getTime() ?? null, attempted: true, originEpoch: recorded.originEpoch ?? delivery.originEpoch };
  };
}

/**
 * How an attempt counts for its endpoint's circuit (docs/design.md §6): a timeout, a connection
 * error, 5xx and 429 are failures, and so is a token that could not be had (docs/design.md §14,
 * `oauth2 token: ...`, no status); 2xx a success; anything else (another answer, or a target
 * the SSRF guard or the egress proxy's policy refused) says nothing about the endpoint's health.
 */
export function circuitVerdict(result: SendResult): AttemptVerdict {
  const { statusCode } = result;
  if (statusCode !== null && statusCode >= 200 && statusCode < 300) return 'success';
  if (result.blocked) return 'neutral';
  if (statusCode === null || statusCode >= 500 || statusCode === 429) return 'failure';
  return 'neutral';
}

function statusClass(statusCode: number | null): string {
  return statusCode === null ? 'error' : `${Math.floor(statusCode / 100)}xx`;
}
