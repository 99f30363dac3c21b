import { DelayedError, Job } from 'bullmq';
import type { Logger } from 'pino';
import type { Config } from '../../../shared/config';
import type { Metrics } from '../../../shared/metrics';
import type { WebhookJobData, WebhookJobName } from '../../../shared/queue';
import { deriveSecret, signedHeaders } from '../../../shared/webhook/signing';
import type { ClaimedDelivery, DeliveryStore } from './delivery-store';
import type { HttpSender } from './http-sender';
import type { RetryPolicy } from './retry-policy';

export interface DeliveryProcessorOptions {
  config: Pick<Config, 'appKey' | 'webhookSalt'>;
  store: DeliveryStore;
  sender: HttpSender;
  policy: RetryPolicy;
  logger: Logger;
  metrics?: Metrics;
}

export type DeliveryJob = Job<WebhookJobData, void, WebhookJobName>;

/** Headers a caller's own headers may not set: the signature set, and what HTTP itself owns. */
const RESERVED_HEADERS = new Set([
  'content-type',
  'content-length',
  'transfer-encoding',
  'host',
  'connection',
  'webhook-id',
  'webhook-timestamp',
  'webhook-signature',
]);

/**
 * The BullMQ processor: one attempt per run. It claims the delivery (one query), signs the
 * stored body with a fresh timestamp and the stable webhook-id, sends it, and records the
 * attempt with the delivery's new state (one query). A retry moves this same job to the
 * delayed set until the next attempt is due (BullMQ "Manually move a job to delayed"), so
 * the retry count lives in PostgreSQL and survives Redis losing its data.
 *
 * @throws DelayedError after scheduling a retry (BullMQ's signal, not a failure); database
 *   errors, which fail the job and let BullMQ retry it
 */
export function createDeliveryProcessor(options: DeliveryProcessorOptions) {
  const { store, sender, policy, logger, metrics, config } = options;

  async function postpone(job: DeliveryJob, token: string | undefined, at: Date): Promise<never> {
    await job.moveToDelayed(at.getTime(), token);
    throw new DelayedError();
  }

  async function unclaimed(job: DeliveryJob, token: string | undefined, log: Logger): Promise<void> {
    const state = await store.peek(job.data.deliveryId);
    if (!state) {
      log.warn('delivery not found; dropping the job');
      return;
    }
    if ((state.status === 'pending' || state.status === 'delivering') && state.nextAttemptAt) {
      log.debug({ nextAttemptAt: state.nextAttemptAt }, 'attempt not due yet; delaying the job');
      return postpone(job, token, state.nextAttemptAt);
    }
    log.debug({ status: state.status }, 'delivery already finished; duplicate job ignored');
  }

  return async function processDelivery(job: DeliveryJob, token?: string): Promise<void> {
    const log = logger.child({ deliveryId: job.data.deliveryId });
    const oneShot = job.name === 'redeliver';
    const delivery = await store.claim(job.data.deliveryId, oneShot);
    if (!delivery) return unclaimed(job, token, log);
    if (delivery.endpointActive === false && !oneShot) {
      await store.failWithoutAttempt(delivery.id, 'endpoint disabled');
      log.warn({ endpointId: delivery.endpointId }, 'endpoint disabled; delivery failed without an attempt');
      return;
    }

    let headers: Record<string, string>;
    const body = Buffer.from(delivery.body, 'utf8');
    try {
      headers = buildHeaders(delivery, body, config);
    } catch (error) {
      await store.failWithoutAttempt(delivery.id, `cannot sign: ${(error as Error).message}`);
      log.error({ err: error }, 'cannot sign the delivery; failed without an attempt');
      return;
    }

    const attemptNumber = delivery.attempts + 1;
    const result = await sender.send({ url: delivery.url, method: delivery.method, body, headers });
    const decision = policy.decide(attemptNumber, result, { oneShot });
    const nextAttemptAt = decision.kind === 'retry' ? new Date(Date.now() + decision.delayMs) : null;
    const disable = decision.kind === 'failed' && decision.disableEndpoint && delivery.endpointId !== null;
    await store.recordAttempt({
      deliveryId: delivery.id,
      attemptNumber,
      statusCode: result.statusCode,
      error: result.error,
      durationMs: result.durationMs,
      response: result.response,
      status: decision.kind === 'retry' ? 'pending' : decision.kind,
      nextAttemptAt,
      disableEndpointId: disable ? delivery.endpointId : null,
      disabledReason: disable ? `410 Gone from ${delivery.url} at ${new Date().toISOString()}` : null,
    });
    metrics?.deliveries.inc({ outcome: disable ? 'disabled' : decision.kind === 'retry' ? 'retried' : decision.kind });
    metrics?.attemptDuration.observe({ status_class: statusClass(result.statusCode) }, result.durationMs / 1000);

    const fields = { attempt: attemptNumber, statusCode: result.statusCode, durationMs: result.durationMs };
    if (decision.kind === 'succeeded') {
      log.info(fields, 'delivered');
      return;
    }
    if (decision.kind === 'failed') {
      log.warn({ ...fields, error: result.error, endpointDisabled: disable }, 'delivery failed; no more attempts');
      return;
    }
    log.info({ ...fields, error: result.error, nextAttemptAt }, 'attempt failed; retry scheduled');
    return postpone(job, token, nextAttemptAt as Date);
  };
}

/**
 * The caller's own headers plus the signature set. While the endpoint's secret rotates, the
 * previous secret adds a second `v1` entry after the current one's (Standard Webhooks lets a
 * receiver accept any listed signature); X-Signature has room for one, so it uses the current
 * secret. A delivery given its own secret is not the endpoint's to rotate.
 */
function buildHeaders(
  delivery: ClaimedDelivery,
  body: Buffer,
  config: Pick<Config, 'appKey' | 'webhookSalt'>,
): Record<string, string> {
  const secret = delivery.secret ?? delivery.endpointSecret ?? deriveSecret(config.appKey, config.webhookSalt, delivery.algo);
  const previous = delivery.secret === null ? delivery.endpointPreviousSecret : null;
  const reserved = delivery.signatureHeader.toLowerCase();
  const own: Record<string, string> = {};
  for (const [name, value] of Object.entries(delivery.headers ?? {})) {
    const lower = name.toLowerCase();
    if (!RESERVED_HEADERS.has(lower) && lower !== reserved) own[name] = String(value);
  }
  return {
    ...own,
    ...signedHeaders({
      id: delivery.id,
      timestamp: Math.floor(Date.now() / 1000),
      body,
      secret,
      additionalSecrets: previous && previous !== secret ? [previous] : [],
      algo: delivery.algo,
      signatureHeader: delivery.signatureHeader,
    }),
  };
}

function statusClass(statusCode: number | null): string {
  return statusCode === null ? 'error' : `${Math.floor(statusCode / 100)}xx`;
}
