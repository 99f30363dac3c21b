import { QueryTypes, Sequelize, Transaction } from 'sequelize';
import { activeTraceparent, annotateActiveSpan, WEBHOOK_EVENT, WEBHOOK_IDS } from '../tracing';
import { gateKeyOf } from '../endpoint-gate/gate-keys';
import { eventEnvelope } from './event-data';
import type { EventKind } from './events';
import { newIdAtSql, newIdSql } from './ids';
import { receivesEvent } from './subscription';
import type { DeliveryJob } from '../queue/webhook-queue';

/** One event to fan out to the endpoints subscribed to it (docs/design.md §6 ownership, §11 `POST /events`). */
export interface EventFanOut {
  /** What made the event: a post change, a `POST /events` fan-out, or the system (docs/design.md §6 rev 4). */
  kind: Extract<EventKind, 'post' | 'fan-out' | 'operational'>;
  event: string;
  /**
   * The `_data` of the envelope: any non-empty JSON value, a string sent as a string (a
   * published payload goes through shared/deliveries `eventDataOf` first).
   */
  data: unknown;
  /**
   * The user whose own endpoints also receive it (a post's owner, `POST /events`'s
   * `user_id`); null: operator endpoints only.
   */
  ownerUserId: number | null;
  /** The endpoint an operational event is about, which never receives it. */
  aboutEndpointId?: number;
}

/**
 * Writes the event's `webhook_events` row (docs/design.md §3: its body stored once, also when nobody
 * subscribes, so a replay can find it) and one `webhook_deliveries` row referencing it per
 * endpoint that receives the event (subscription.ts: active, subscribed,
 * operator or the owner's own, filter), inside `transaction`, with `enqueued_at` NULL (the
 * caller queues them after commit, or the outbox relay does). Each row belongs to its
 * endpoint's owner (`user_id`, null for an operator endpoint). The body is the docs/design.md §7
 * envelope, serialised once.
 *
 * @returns the new delivery ids (webhook-ids), in endpoint id order; none when nobody subscribes
 * @throws EncryptionError (shared/webhook) when `data` is empty or not serialisable
 */
export async function insertEventDeliveries(sequelize: Sequelize, transaction: Transaction, fanOut: EventFanOut): Promise<string[]> {
  return (await insertEventDeliveryJobs(sequelize, transaction, fanOut)).map((job) => job.deliveryId);
}

// Typed placeholders: $2 is also the body column's value, which must keep its exact bytes.
const RECEIVES = receivesEvent('ep', { kind: '$5::text', event: '$1::text', owner: '$3::int', body: '$2::text', about: '$6::int' });

/** {@link insertEventDeliveries}, returning each row as the job to add, with its endpoint's gate key. */
export async function insertEventDeliveryJobs(sequelize: Sequelize, transaction: Transaction, fanOut: EventFanOut): Promise<DeliveryJob[]> {
  const body = eventEnvelope(fanOut.event, fanOut.data);
  // One round trip: the ids are drawn by PostgreSQL, the deliveries' at their event's
  // millisecond, so all rows share its day partition (docs/design.md §3). The writing request's trace
  // travels in the row, so a revived job still joins it.
  const rows = await sequelize.query<{ id: string; endpoint_id: number }>(
    `WITH ev AS (
       INSERT INTO webhook_events (id, created_at, kind, event, body, user_id)
       SELECT f.id, webhook_id_time(f.id), $5, $1, $2, $3 FROM (SELECT ${newIdSql('evt_')} AS id OFFSET 0) f
       RETURNING id, created_at
     )
     INSERT INTO webhook_deliveries (id, created_at, event_id, endpoint_id, url, event, user_id, traceparent)
     SELECT ${newIdAtSql('msg_', 'ev.created_at')}, ev.created_at, ev.id, ep.id, ep.url, $1, ep.user_id, $4
       FROM webhook_endpoints ep CROSS JOIN ev
      WHERE ${RECEIVES}
      ORDER BY ep.id
     RETURNING id, endpoint_id`,
    {
      bind: [fanOut.event, body, fanOut.ownerUserId, activeTraceparent(), fanOut.kind, fanOut.aboutEndpointId ?? null],
      type: QueryTypes.SELECT,
      transaction,
    },
  );
  annotateActiveSpan({ [WEBHOOK_EVENT]: fanOut.event, [WEBHOOK_IDS]: rows.map((row) => row.id) });
  return rows.map((row) => ({ deliveryId: row.id, gate: gateKeyOf({ endpointId: row.endpoint_id, url: '' }) }));
}

/**
 * CTEs writing many post events of one name (their `webhook_events` rows and outbox rows) in the same statement as what they
 * announce (a group commit of creates needs no BEGIN/COMMIT then: one statement is atomic).
 * Append them, after a comma, to a WITH whose earlier CTE `source` has one row per event:
 * `ord` (bigint, unique per event), `owner_id` (int; see {@link EventFanOut.ownerUserId}),
 * `traceparent` (text or NULL) and `body` (its docs/design.md §7 envelope, see envelope-pieces.ts).
 * One outbox row per endpoint that receives the event, as {@link insertEventDeliveries}
 * writes, `enqueued_at` NULL. They define `fan_by_event`: per `ord` with deliveries, `delivery_ids` and `endpoint_ids` in endpoint id
 * order; read them with {@link jobsOfEvent}.
 *
 * @param eventParam - the placeholder holding the event name, such as `$11`
 */
export function fanOutClauses(eventParam: string): string {
  // Each CTE holding new ids is read twice, so PostgreSQL materialises it: each id is drawn once.
  // An event's deliveries are made at its millisecond: all its rows share one day partition.
  return `ev AS MATERIALIZED (
       SELECT s.*, ${newIdSql('evt_')} AS event_id FROM source s
     ), ev_written AS (
       INSERT INTO webhook_events (id, created_at, kind, event, body, user_id)
       SELECT event_id, webhook_id_time(event_id), 'post', ${eventParam}, body, owner_id FROM ev ORDER BY ord
     ), fan AS MATERIALIZED (
       SELECT ${newIdAtSql('msg_', 'webhook_id_time(s.event_id)')} AS id, webhook_id_time(s.event_id) AS created_at,
              ep.id AS endpoint_id, ep.url, s.event_id, ep.user_id, s.traceparent, s.ord
         FROM ev s
         JOIN webhook_endpoints ep
           ON ${receivesEvent('ep', { kind: "'post'", event: eventParam, owner: 's.owner_id', body: 's.body' })}
     ), fan_written AS (
       INSERT INTO webhook_deliveries (id, created_at, event_id, endpoint_id, url, event, user_id, traceparent)
       SELECT id, created_at, event_id, endpoint_id, url, ${eventParam}, user_id, traceparent FROM fan ORDER BY ord, endpoint_id
     ), fan_by_event AS (
       SELECT ord, array_agg(id ORDER BY endpoint_id) AS delivery_ids, array_agg(endpoint_id ORDER BY endpoint_id) AS endpoint_ids
         FROM fan GROUP BY ord
     )`;
}

/** One event's row of `fan_by_event` (see {@link fanOutClauses}); both null when nobody subscribes. */
export interface FannedOutEvent {
  delivery_ids: string[] | null;
  endpoint_ids: number[] | null;
}

/** The jobs to add for one event written by {@link fanOutClauses}, with their endpoints' gate keys. */
export function jobsOfEvent(row: FannedOutEvent): DeliveryJob[] {
  const endpointIds = row.endpoint_ids ?? [];
  return (row.delivery_ids ?? []).map((deliveryId, index) => ({ deliveryId, gate: gateKeyOf({ endpointId: endpointIds[index], url: '' }) }));
}
