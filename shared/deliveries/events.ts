import { QueryTypes, Sequelize, type Transaction } from 'sequelize';
import { createdAtOf } from '../db/partitions';
import { newEventId } from '../webhook/ids';

/**
 * What made an event (docs/design.md §3 `webhook_events.kind`): a post change, a fan-out of
 * `POST /api/v1/events`, an ad-hoc send, an endpoint test, an operational event such as
 * `endpoint.disabled` (§6 rev 4; rows made before it say `notice`). Replay (§14) considers
 * post changes and fan-outs only.
 */
export type EventKind = 'post' | 'fan-out' | 'send' | 'test' | 'operational';

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

/**
 * Writes an event and its one delivery in a single statement (atomic, one round trip), the
 * delivery `pending` with `enqueued_at` NULL; inside `transaction` when one is given.
 *
 * @returns the event id
 */
export async function insertSingleDelivery(sequelize: Sequelize, delivery: SingleDelivery, transaction?: Transaction): Promise<string> {
  // The event shares its delivery's millisecond, so both rows live in one day partition (docs/design.md §3).
  const createdAt = createdAtOf(delivery.id);
  const eventId = newEventId(createdAt.getTime());
  await sequelize.query(
    `WITH ev AS (
       INSERT INTO webhook_events (id, created_at, kind, event, body, user_id) VALUES ($1, $15, $2, $3, $4, $5)
     )
     INSERT INTO webhook_deliveries (id, created_at, event_id, endpoint_id, user_id, url, method, event, headers, secret, algo, signature_header, traceparent)
     VALUES ($6, $15, $1, $7, $5, $8, $9, $3, $10::jsonb, $11, $12, $13, $14)`,
    {
      bind: [
        eventId,
        delivery.kind,
        delivery.event,
        delivery.body,
        delivery.userId,
        delivery.id,
        delivery.endpointId,
        delivery.url,
        delivery.method,
        JSON.stringify(delivery.headers),
        delivery.secret,
        delivery.algo,
        delivery.signatureHeader,
        delivery.traceparent,
        createdAt,
      ],
      type: QueryTypes.INSERT,
      transaction,
    },
  );
  return eventId;
}
