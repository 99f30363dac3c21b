import { QueryTypes, Sequelize } from 'sequelize';
import { newEventId } from '../webhook/ids';

/**
 * What made an event (DESIGN §3 `webhook_events.kind`): a post change, a fan-out of
 * `POST /api/v1/events`, an ad-hoc send, an endpoint test, an operator notice such as
 * `endpoint.disabled`. Replay (§14) considers post changes and fan-outs only.
 */
export type EventKind = 'post' | 'fan-out' | 'send' | 'test' | 'notice';

/**
 * A new `msg_` or `evt_` id drawn by PostgreSQL inside a statement (the migration's
 * `webhook_new_id`, the same UUIDv7 format as newWebhookId() and newEventId()).
 */
export const newIdSql = (prefix: 'msg_' | 'evt_'): string => `webhook_new_id('${prefix}')`;

/** One delivery of its own event: an ad-hoc send or an endpoint test. */
export interface SingleDelivery {
  /** The webhook-id. */
  id: string;
  kind: Extract<EventKind, 'send' | 'test'>;
  event: string;
  /** The exact bytes to send (the DESIGN §7 envelope). */
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
 * delivery `pending` with `enqueued_at` NULL.
 *
 * @returns the event id
 */
export async function insertSingleDelivery(sequelize: Sequelize, delivery: SingleDelivery): Promise<string> {
  const eventId = newEventId();
  await sequelize.query(
    `WITH ev AS (
       INSERT INTO webhook_events (id, kind, event, body, user_id) VALUES ($1, $2, $3, $4, $5)
     )
     INSERT INTO webhook_deliveries (id, event_id, endpoint_id, user_id, url, method, event, headers, secret, algo, signature_header, traceparent)
     VALUES ($6, $1, $7, $5, $8, $9, $3, $10::jsonb, $11, $12, $13, $14)`,
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
      ],
      type: QueryTypes.INSERT,
    },
  );
  return eventId;
}
