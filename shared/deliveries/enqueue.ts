import type { Sequelize, Transaction } from 'sequelize';
import type { Database } from '../db';
import { shownUrl } from '../http/url-display';
import { isReservedEventName } from './operational-event-names';
import { activeTraceparent, annotateActiveSpan, WEBHOOK_EVENT, WEBHOOK_ID } from '../tracing';
import { isEd25519PublicKey } from '../webhook/ed25519';
import { HmacAlgo, assertAlgo, newWebhookId, serializeEnvelope, signedHeaders } from '../webhook/signing';
import { gateKeysOf } from './delivery-gates';
import { markEnqueued } from './enqueued-mark';
import { insertSingleDelivery } from './events';
import { findRedeliveryCandidate, Reattempt, reopenForRedelivery, rollBackReattempts } from './reattempt';
import { DeliveryInProgressError, DeliveryNotFoundError, InvalidWebhookError, QueueUnavailableError } from '../queue/errors';
import { gateKeyOf } from '../endpoint-gate/gate-keys';
import { JobToAdd, QueueLogger, WebhookQueue, addDeliveryJobs, isQueueReady } from '../queue/webhook-queue';

/** Methods a queued webhook may use; each carries the signed body. */
export const WEBHOOK_METHODS = ['POST', 'PUT', 'PATCH', 'DELETE'] as const;
export type WebhookMethod = (typeof WEBHOOK_METHODS)[number];

/** Where deliveries are written and queued. */
export interface DeliveryDeps {
  db: Database;
  queue: WebhookQueue;
  logger?: QueueLogger;
}

/**
 * Work done inside the transaction that commits new deliveries, given their ids: what an
 * Idempotency-Key records (docs/design.md §12.1), so a retry after a crash or a connection
 * lost during COMMIT finds exactly what was committed. A rejection rolls the deliveries back.
 */
export type InCommit = (transaction: Transaction, deliveryIds: string[]) => Promise<void>;

/** One webhook for another service to send (docs/design.md §6.2). */
export interface EnqueueWebhookOptions {
  /** http:// or https:// target. */
  url: string;
  /** Written to `_config["app.webhook.event"]`. */
  event: string;
  /** The `_data` section: any non-empty JSON value, or a raw JSON string. */
  payload: unknown;
  /** Default POST. */
  method?: WebhookMethod;
  /** Extra request headers; they cannot replace the signature headers or Content-Type. */
  headers?: Record<string, string>;
  /** Signing secret; default: derived by the worker from APP_KEY and WEBHOOK_SALT. */
  secret?: string;
  /** HMAC of the hex signature header; default sha256. */
  algo?: HmacAlgo;
  /** Name of the hex signature header; default `X-Signature`. */
  signatureHeader?: string;
  /** The api user who asked for it; only that user can read or redeliver it over HTTP. */
  userId?: number;
}

/**
 * Records a webhook (its event and its delivery, docs/design.md §3.2) and queues it: the rows first, then the job, so a Redis outage loses
 * nothing (the api's outbox relay adds rows that missed the queue).
 *
 * @param inCommit - run in the rows' own transaction, with the delivery id
 * @returns the delivery id, which is also the `webhook-id` header the receiver sees
 * @throws InvalidWebhookError for a URL that is not http(s), an unknown method, a
 *   malformed `whsec_` secret or the name of an operational event (docs/design.md §6.6)
 * @throws EncryptionError (shared/webhook) for an empty or unserialisable payload
 * @throws LogicError (shared/webhook) for an unsupported algo
 */
export async function enqueueWebhook(options: EnqueueWebhookOptions, deps: DeliveryDeps, inCommit?: InCommit): Promise<string> {
  const method = options.method ?? 'POST';
  if (!(WEBHOOK_METHODS as readonly string[]).includes(method)) {
    throw new InvalidWebhookError(`Unsupported method ${method}: use one of ${WEBHOOK_METHODS.join(', ')}.`);
  }
  if (isReservedEventName(options.event)) {
    throw new InvalidWebhookError(`Event ${options.event} is reserved: the system sends it about endpoints and deliveries (an operational event).`);
  }
  assertHttpUrl(options.url);
  if (options.secret !== undefined) assertSecret(options.secret);
  const algo = assertAlgo(options.algo ?? 'sha256');
  const body = serializeEnvelope(options.payload, { event: options.event, signable: true });
  const id = newWebhookId();
  const delivery = {
    id,
    kind: 'send' as const,
    event: options.event,
    body,
    endpointId: null,
    userId: options.userId ?? null,
    url: options.url,
    method,
    headers: options.headers ?? {},
    secret: options.secret ?? null,
    algo,
    signatureHeader: options.signatureHeader ?? 'X-Signature',
    traceparent: activeTraceparent(),
  };
  // Alone, one statement is atomic; with work to commit beside it, a transaction holds both.
  if (inCommit) {
    await deps.db.sequelize.transaction(async (transaction) => {
      await insertSingleDelivery(deps.db.sequelize, delivery, transaction);
      await inCommit(transaction, [id]);
    });
  } else {
    await insertSingleDelivery(deps.db.sequelize, delivery);
  }
  annotateActiveSpan({ [WEBHOOK_EVENT]: options.event, [WEBHOOK_ID]: id });
  await queueRecordedDeliveries(deps, [{ deliveryId: id, gate: gateKeyOf({ endpointId: null, url: options.url }) }]);
  return id;
}

/**
 * Adds the jobs of delivery rows that are already committed and marks the rows
 * `enqueued_at`. A failure (Redis away) is logged, not thrown: the rows stay unmarked and the
 * api's outbox relay adds them later.
 *
 * @param deliveries - delivery ids, or jobs when the caller knows more (the gate key); with
 *   several queue partitions a missing gate key is read from the rows (one query), since it
 *   picks the partition
 * @param mark - marks the rows once their jobs are added; default at once
 *   (shared/deliveries `markEnqueued`), the outbox's own deferred marks on the hot path
 */
export async function queueRecordedDeliveries(
  deps: DeliveryDeps,
  deliveries: readonly (string | JobToAdd)[],
  mark: (ids: string[]) => Promise<void> | void = (ids) => markEnqueued(deps.db.sequelize, ids),
): Promise<void> {
  const given = deliveries.map((delivery): JobToAdd => (typeof delivery === 'string' ? { deliveryId: delivery } : delivery));
  const ids = given.map((job) => job.deliveryId);
  try {
    const jobs = deps.queue.count > 1 ? await withGates(deps.db.sequelize, given) : given;
    await addDeliveryJobs(deps.queue, jobs);
    await mark(ids);
  } catch (error) {
    deps.logger?.warn({ err: error, deliveryIds: ids }, 'enqueue failed; the outbox relay will retry');
  }
}

/**
 * The jobs with their gate keys, those missing read from their rows; a job whose row is gone
 * is dropped (the worker would drop it too).
 */
async function withGates(sequelize: Sequelize, jobs: readonly JobToAdd[]): Promise<JobToAdd[]> {
  const unknown = jobs.filter((job) => job.gate === undefined).map((job) => job.deliveryId);
  if (unknown.length === 0) return [...jobs];
  const gates = await gateKeysOf(sequelize, unknown);
  return jobs.flatMap((job) => {
    const gate = job.gate ?? gates.get(job.deliveryId);
    return gate === undefined ? [] : [{ ...job, gate }];
  });
}

/**
 * Queues exactly one new attempt of a finished delivery (succeeded or failed), with the
 * same webhook-id and body and a fresh signature; the delivery is `pending` until it runs.
 * Who may ask, and for which endpoints, is the caller's check (shared/operations).
 *
 * @throws DeliveryNotFoundError when there is no such delivery
 * @throws DeliveryInProgressError while the delivery is pending or being delivered
 * @throws QueueUnavailableError when Redis is away; the delivery is left as it was
 */
export async function redeliverWebhook(deps: DeliveryDeps, id: string): Promise<void> {
  const delivery = await findRedeliveryCandidate(deps.db.sequelize, id);
  if (!delivery) throw new DeliveryNotFoundError(id);
  if (delivery.status === 'pending' || delivery.status === 'delivering') throw new DeliveryInProgressError(id);
  if (!isQueueReady(deps.queue)) throw new QueueUnavailableError('Redis is not connected.');
  const reattempt = await reopenForRedelivery(deps.db.sequelize, delivery);
  if (!reattempt) throw new DeliveryInProgressError(id);
  await queueReattempts(deps, [reattempt]);
}

/**
 * Adds the `redeliver` job of each delivery a redelivery or recovery made pending
 * (shared/deliveries/reattempt.ts); when that fails, puts the rows back as they were.
 *
 * @throws QueueUnavailableError when Redis is away or fails
 */
export async function queueReattempts(deps: DeliveryDeps, reattempts: readonly Reattempt[]): Promise<void> {
  try {
    await addOneShotJobs(
      deps.queue,
      reattempts.map((row) => ({ deliveryId: row.id, gate: gateKeyOf({ endpointId: row.endpoint_id, url: row.url }) })),
    );
  } catch (error) {
    await rollBackReattempts(deps.db.sequelize, reattempts);
    throw error;
  }
}

// Removals run this many at a time: enough to recover 10,000 deliveries in seconds, few
// enough not to flood Redis.
const REMOVE_BATCH = 200;

/**
 * Adds one `redeliver` job (exactly one attempt) per delivery. The finished job may still
 * be kept in Redis under the same id in the delivery's partition, and adding a job whose id
 * exists is a no-op in BullMQ, so the old one goes first (one kept in a partition the count
 * used before blocks nothing).
 *
 * @param jobs - the deliveries with their gate keys (shared/endpoint-gate `gateKeyOf`)
 * @throws QueueUnavailableError when Redis is away or fails
 */
export async function addOneShotJobs(queue: WebhookQueue, jobs: readonly { deliveryId: string; gate: string }[]): Promise<void> {
  if (!isQueueReady(queue)) throw new QueueUnavailableError('Redis is not connected.');
  try {
    for (let start = 0; start < jobs.length; start += REMOVE_BATCH) {
      await Promise.all(jobs.slice(start, start + REMOVE_BATCH).map(async ({ deliveryId, gate }) => queue.at(queue.shardOf(gate)).remove(deliveryId)));
    }
    await addDeliveryJobs(queue, jobs.map(({ deliveryId, gate }) => ({ deliveryId, gate, name: 'redeliver' as const })));
  } catch (error) {
    if (error instanceof QueueUnavailableError) throw error;
    throw new QueueUnavailableError('Could not queue the redelivery.', { cause: error });
  }
}

function assertHttpUrl(url: string): void {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch (error) {
    throw new InvalidWebhookError(`Invalid webhook URL: ${shownUrl(url)}`, { cause: error });
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new InvalidWebhookError(`Webhook URL must be http or https: ${shownUrl(url)}`);
  }
}

function assertSecret(secret: string): void {
  if (isEd25519PublicKey(secret)) throw new InvalidWebhookError('Invalid secret: a whpk_ public key cannot sign; give the whsk_ private key.');
  try {
    // Signing once is the authoritative check of a secret's encoding (whsec_ + base64, whsk_).
    signedHeaders({ id: 'check', timestamp: 0, body: '', secret });
  } catch (error) {
    throw new InvalidWebhookError('Invalid secret: use whsec_ followed by base64, a whsk_ ed25519 private key, or any other non-empty string.', {
      cause: error,
    });
  }
}
