import { QueryTypes, type Sequelize, type Transaction } from 'sequelize';
import type { Database, DeliveryStatus } from '../db';
import { findById, findByIds, keyOfId, keyRange } from '../db/partitions';
import { rawQuery } from '../db/raw-query';
import { isReservedEventName } from '../deliveries/operational-event-names';
import { activeTraceparent, annotateActiveSpan, WEBHOOK_EVENT, WEBHOOK_ID } from '../tracing';
import { isEd25519PublicKey } from '../webhook/ed25519';
import { HmacAlgo, assertAlgo, newWebhookId, serializeEnvelope, signedHeaders } from '../webhook/signing';
import { insertSingleDelivery } from './events';
import { DeliveryInProgressError, DeliveryNotFoundError, InvalidWebhookError, QueueUnavailableError } from './errors';
import { gateKeyOf } from '../endpoint-gate/gate-keys';
import { DeliveryJob, QueueLogger, WebhookQueue, addDeliveryJobs, isQueueReady } from './webhook-queue';

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
 * Idempotency-Key records (DESIGN §12, revision 4), so a retry after a crash or a connection
 * lost during COMMIT finds exactly what was committed. A rejection rolls the deliveries back.
 */
export type InCommit = (transaction: Transaction, deliveryIds: string[]) => Promise<void>;

/** One webhook for another service to send (DESIGN §6, "Other services enqueue too"). */
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
  /** Signing secret; default: derived by the worker from APP_KEY and WEBHOOK_SALT (DESIGN §8). */
  secret?: string;
  /** HMAC of the hex signature header; default sha256. */
  algo?: HmacAlgo;
  /** Name of the hex signature header; default `X-Signature`. */
  signatureHeader?: string;
  /** The api user who asked for it; only that user can read or redeliver it over HTTP. */
  userId?: number;
}

/**
 * Records a webhook (its event and its delivery, DESIGN §3) and queues it: the rows first, then the job, so a Redis outage loses
 * nothing (the api's outbox relay adds rows that missed the queue).
 *
 * @param inCommit - run in the rows' own transaction, with the delivery id
 * @returns the delivery id, which is also the `webhook-id` header the receiver sees
 * @throws InvalidWebhookError for a URL that is not http(s), an unknown method, a
 *   malformed `whsec_` secret or the name of an operational event (DESIGN §6 rev 4)
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
 */
export async function queueRecordedDeliveries(deps: DeliveryDeps, deliveries: readonly (string | DeliveryJob)[]): Promise<void> {
  const given = deliveries.map((delivery): DeliveryJob => (typeof delivery === 'string' ? { deliveryId: delivery } : delivery));
  const ids = given.map((job) => job.deliveryId);
  try {
    const jobs = deps.queue.count > 1 ? await withGates(deps.db.sequelize, given) : given;
    await addDeliveryJobs(deps.queue, jobs);
    await markEnqueued(deps.db.sequelize, ids);
  } catch (error) {
    deps.logger?.warn({ err: error, deliveryIds: ids }, 'enqueue failed; the outbox relay will retry');
  }
}

/**
 * The jobs with their gate keys, those missing read from their rows; a job whose row is gone
 * is dropped (the worker would drop it too).
 */
async function withGates(sequelize: Sequelize, jobs: readonly DeliveryJob[]): Promise<DeliveryJob[]> {
  const unknown = jobs.filter((job) => job.gate === undefined).map((job) => job.deliveryId);
  if (unknown.length === 0) return [...jobs];
  const rows = await findByIds(unknown, (ids, keys) =>
    rawQuery<{ id: string; endpoint_id: number | null; url: string }>(sequelize, {
      name: 'outbox-gate-keys',
      text: `SELECT id, endpoint_id, url FROM webhook_deliveries WHERE id = ANY($1::text[]) AND ${keyRange('created_at', '$2', '$3')}`,
      values: [ids, ...keys],
    }),
  );
  const gates = new Map(rows.map((row) => [row.id, gateKeyOf({ endpointId: row.endpoint_id, url: row.url })]));
  return jobs.flatMap((job) => {
    const gate = job.gate ?? gates.get(job.deliveryId);
    return gate === undefined ? [] : [{ ...job, gate }];
  });
}

/**
 * Sets `enqueued_at` on delivery rows whose jobs are in the queue, skipping rows another
 * transaction holds. The job is already in Redis, so a worker may be claiming some of these
 * rows in a batch of its own: waiting for them, while holding the rest, let the two statements
 * lock the same rows in opposite orders, a deadlock PostgreSQL resolves only after its
 * `deadlock_timeout` (1 s), by failing one of them. A skipped row loses nothing: the claim sets
 * `enqueued_at` itself, and a row left pending and unmarked is added again by the relay.
 */
export async function markEnqueued(sequelize: Sequelize, ids: string[], transaction?: Transaction): Promise<void> {
  const sql = `UPDATE webhook_deliveries w SET enqueued_at = now(), updated_at = now()
    FROM (SELECT id, created_at FROM webhook_deliveries WHERE id = ANY($1::text[]) AND ${keyRange('created_at', '$2', '$3')} FOR UPDATE SKIP LOCKED) unheld
   WHERE w.id = unheld.id AND w.created_at = unheld.created_at AND ${keyRange('w.created_at', '$2', '$3')}
   RETURNING w.id`;
  await findByIds(ids, (some, keys) =>
    // Outside a transaction this runs after every batch of creates: a prepared statement, past Sequelize's pipeline.
    transaction
      ? sequelize.query<{ id: string }>(sql, { bind: [some, ...keys], transaction, type: QueryTypes.SELECT })
      : rawQuery<{ id: string }>(sequelize, { name: 'outbox-mark-enqueued', text: sql, values: [some, ...keys] }),
  );
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
  const { sequelize } = deps.db;
  const byId = `id = $1 AND ${keyOfId('created_at', '$2')}`;
  const [delivery] = await findById(id, (key) =>
    sequelize.query<{ status: DeliveryStatus; endpoint_id: number | null; url: string; created_at: Date }>(
      `SELECT status, endpoint_id, url, created_at FROM webhook_deliveries WHERE ${byId}`,
      { bind: [id, key], type: QueryTypes.SELECT },
    ),
  );
  if (!delivery) throw new DeliveryNotFoundError(id);
  // The row's own partition key from here on: a legacy row's names the legacy partition.
  const key = delivery.created_at;
  const previous = delivery.status;
  if (previous === 'pending' || previous === 'delivering') throw new DeliveryInProgressError(id);
  if (!isQueueReady(deps.queue)) throw new QueueUnavailableError('Redis is not connected.');
  const claimed = await sequelize.query<{ id: string }>(
    `UPDATE webhook_deliveries SET status = 'pending', enqueued_at = now(), next_attempt_at = now(), one_shot = true, updated_at = now()
      WHERE ${byId} AND status = $3 RETURNING id`,
    { bind: [id, key, previous], type: QueryTypes.SELECT },
  );
  if (claimed.length === 0) throw new DeliveryInProgressError(id);
  try {
    await addOneShotJobs(deps.queue, [{ deliveryId: id, gate: gateKeyOf({ endpointId: delivery.endpoint_id, url: delivery.url }) }]);
  } catch (error) {
    await sequelize.query(`UPDATE webhook_deliveries SET status = $3, one_shot = false, updated_at = now() WHERE ${byId} AND status = 'pending'`, {
      bind: [id, key, previous],
    });
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
      await Promise.all(jobs.slice(start, start + REMOVE_BATCH).map(async ({ deliveryId, gate }) => queue.at(queue.partitionOf(gate)).remove(deliveryId)));
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
    throw new InvalidWebhookError(`Invalid webhook URL: ${url}`, { cause: error });
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new InvalidWebhookError(`Webhook URL must be http or https: ${url}`);
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
