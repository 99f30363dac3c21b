import { QueryTypes, Sequelize, Transaction } from 'sequelize';
import { activeTraceparent, annotateActiveSpan, WEBHOOK_EVENT, WEBHOOK_IDS } from '../tracing';
import { serializeEnvelope } from '../webhook/signing';
import { gateKeyOf } from './circuit-breaker';
import type { DeliveryJob } from './webhook-queue';

/** One event to fan out to the endpoints subscribed to it (DESIGN §6 ownership, §11 `POST /events`). */
export interface EventFanOut {
  event: string;
  /** The `_data` of the envelope: any non-empty JSON value. */
  data: unknown;
  /**
   * The user whose own endpoints also receive it (a post's owner, `POST /events`'s
   * `user_id`); null: operator endpoints only.
   */
  ownerUserId: number | null;
}

/**
 * Writes one `webhook_deliveries` row per active endpoint subscribed to the event (an
 * endpoint with no events takes every event) among the operator endpoints and the owner's
 * own, inside `transaction`, with `enqueued_at` NULL (the caller queues them after commit,
 * or the outbox relay does). Each row belongs to its endpoint's owner (`user_id`, null for an
 * operator endpoint). The body is the DESIGN §7 envelope, serialised once.
 *
 * @returns the new delivery ids (webhook-ids), in endpoint id order; none when nobody subscribes
 * @throws EncryptionError (shared/webhook) when `data` is empty or not serialisable
 */
export async function insertEventDeliveries(sequelize: Sequelize, transaction: Transaction, fanOut: EventFanOut): Promise<string[]> {
  return (await insertEventDeliveryJobs(sequelize, transaction, fanOut)).map((job) => job.deliveryId);
}

/** {@link insertEventDeliveries}, returning each row as the job to add, with its endpoint's gate key. */
export async function insertEventDeliveryJobs(sequelize: Sequelize, transaction: Transaction, fanOut: EventFanOut): Promise<DeliveryJob[]> {
  const body = serializeEnvelope(fanOut.data, { event: fanOut.event, signable: true });
  // One round trip: the ids are drawn by PostgreSQL in the newWebhookId() format
  // (msg_ + 22 base64url characters of a random UUID's 16 bytes). The writing request's
  // trace travels in the row, so a revived job still joins it.
  const rows = await sequelize.query<{ id: string; endpoint_id: number }>(
    `INSERT INTO webhook_deliveries (id, endpoint_id, url, event, body, user_id, traceparent)
     SELECT 'msg_' || rtrim(translate(encode(decode(replace(gen_random_uuid()::text, '-', ''), 'hex'), 'base64'), '+/', '-_'), '='),
            id, url, $1, $2, user_id, $4
       FROM webhook_endpoints
      WHERE active AND (cardinality(events) = 0 OR $1 = ANY(events)) AND (user_id IS NULL OR user_id = $3)
      ORDER BY id
     RETURNING id, endpoint_id`,
    { bind: [fanOut.event, body, fanOut.ownerUserId, activeTraceparent()], type: QueryTypes.SELECT, transaction },
  );
  annotateActiveSpan({ [WEBHOOK_EVENT]: fanOut.event, [WEBHOOK_IDS]: rows.map((row) => row.id) });
  return rows.map((row) => ({ deliveryId: row.id, gate: gateKeyOf({ endpointId: row.endpoint_id, url: '' }) }));
}
