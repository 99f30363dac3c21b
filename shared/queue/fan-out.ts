import { QueryTypes, Sequelize, Transaction } from 'sequelize';
import type { RawConnection } from '../db/raw-query';
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

/** One event of a batch for {@link insertEventDeliveryJobsBatch}: its data, owner and the trace of the request that wrote it. */
export interface BatchedFanOut {
  data: unknown;
  ownerUserId: number | null;
  /** W3C traceparent of the writing request (stored in the row), or null. */
  traceparent: string | null;
}

/**
 * {@link insertEventDeliveryJobs} for many events of one kind in one statement (group commit):
 * the envelopes are serialised here, the rows written from `unnest` arrays on `connection`
 * (inside the caller's BEGIN .. COMMIT), each with its own event's traceparent.
 *
 * @returns for each event, in input order, its jobs in endpoint id order (none when nobody subscribes)
 * @throws EncryptionError (shared/webhook) when one event's data is empty or not serialisable
 * @throws DatabaseError (Sequelize's) when the statement fails; see shared/db/raw-query.ts
 */
export async function insertEventDeliveryJobsBatch(connection: RawConnection, event: string, fanOuts: readonly BatchedFanOut[]): Promise<DeliveryJob[][]> {
  const bodies = fanOuts.map((fanOut) => serializeEnvelope(fanOut.data, { event, signable: true }));
  // The ids are drawn once in the CTE (it is read twice, so PostgreSQL materialises it) and
  // returned with each event's position, which RETURNING of the INSERT could not give.
  const rows = await connection.query<{ id: string; endpoint_id: number; ord: string }>({
    name: 'outbox-insert-event-deliveries-batch',
    text: `WITH fan AS (
       SELECT 'msg_' || rtrim(translate(encode(decode(replace(gen_random_uuid()::text, '-', ''), 'hex'), 'base64'), '+/', '-_'), '=') AS id,
              ep.id AS endpoint_id, ep.url, e.body, ep.user_id, e.traceparent, e.ord
         FROM unnest($2::text[], $3::int[], $4::text[]) WITH ORDINALITY AS e(body, owner_id, traceparent, ord)
         JOIN webhook_endpoints ep
           ON ep.active AND (cardinality(ep.events) = 0 OR $1 = ANY(ep.events)) AND (ep.user_id IS NULL OR ep.user_id = e.owner_id)
     ), written AS (
       INSERT INTO webhook_deliveries (id, endpoint_id, url, event, body, user_id, traceparent)
       SELECT id, endpoint_id, url, $1, body, user_id, traceparent FROM fan ORDER BY ord, endpoint_id
     )
     SELECT id, endpoint_id, ord FROM fan ORDER BY ord, endpoint_id`,
    values: [event, bodies, fanOuts.map((fanOut) => fanOut.ownerUserId), fanOuts.map((fanOut) => fanOut.traceparent)],
  });
  const jobs: DeliveryJob[][] = fanOuts.map(() => []);
  for (const row of rows) jobs[Number(row.ord) - 1].push({ deliveryId: row.id, gate: gateKeyOf({ endpointId: row.endpoint_id, url: '' }) });
  return jobs;
}
