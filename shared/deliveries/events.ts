import { QueryTypes, Sequelize, type Transaction } from 'sequelize';
import { eventRowsClauses, type EventKind } from './event-rows';

/** One delivery of its own event: an ad-hoc send or an endpoint test. */
export interface SingleDelivery {
  /** The webhook-id. */
  id: string;
  kind: Extract<EventKind, 'send' | 'test'>;
  event: string;
  /** The exact bytes to send (the docs/design.md §7 envelope). */
  body: string;
  endpointId: number | null;
  /** The delivery's owner (who may read and redeliver it), also recorded on the event. */
  userId: number | null;
  url: string;
  method: string;
  headers: Record<string, string>;
  secret: string | null;
  algo: string;
  signatureHeader: string;
  traceparent: string | null;
}

// One event to the target the row names: event-rows.ts with given targets, a batch of one.
const SINGLE_DELIVERY = `WITH source AS (
       SELECT 1::bigint AS ord, $2::text AS kind, $3::text AS event, $5::int AS owner_id, $4::text AS body, $13::text AS traceparent,
              $1::text AS delivery_id, $6::int AS endpoint_id, $7::text AS url, $5::int AS user_id, $8::text AS method, $9::jsonb AS headers,
              $10::text AS secret, $11::text AS algo, $12::text AS signature_header
     ), ${eventRowsClauses({ events: 'new', targets: 'given' })}
     SELECT event_id FROM ev`;

/**
 * Writes an event and its one delivery in a single statement (atomic, one round trip), the
 * delivery `pending` with `enqueued_at` NULL; inside `transaction` when one is given. The event
 * is made at its delivery's millisecond, so both rows live in one day partition (docs/design.md §3.4).
 *
 * @returns the event id
 */
export async function insertSingleDelivery(sequelize: Sequelize, delivery: SingleDelivery, transaction?: Transaction): Promise<string> {
  const [row] = await sequelize.query<{ event_id: string }>(SINGLE_DELIVERY, {
    bind: [
      delivery.id,
      delivery.kind,
      delivery.event,
      delivery.body,
      delivery.userId,
      delivery.endpointId,
      delivery.url,
      delivery.method,
      JSON.stringify(delivery.headers),
      delivery.secret,
      delivery.algo,
      delivery.signatureHeader,
      delivery.traceparent,
    ],
    type: QueryTypes.SELECT,
    transaction,
  });
  return row.event_id;
}
