import { QueryTypes, Sequelize, Transaction } from 'sequelize';
import { activeTraceparent, annotateActiveSpan, WEBHOOK_EVENT, WEBHOOK_IDS } from '../tracing';
import { endpointGateKey } from '../endpoint-gate/gate-keys';
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
 * endpoint that receives the event (subscription.ts), inside `transaction`: the
 * {@link eventRowsClauses} of a batch of one. The body is the docs/design.md §7 envelope,
 * serialised once. The writing request's trace travels in the rows, so a revived job still joins it.
 *
 * @returns each delivery as the job to add, with its endpoint's gate key, in endpoint id order;
 *   none when nobody subscribes
 * @throws EncryptionError (shared/webhook) when `data` is empty or not serialisable
 */
export async function insertEventDeliveryJobs(sequelize: Sequelize, transaction: Transaction, fanOut: EventFanOut): Promise<DeliveryJob[]> {
  const body = eventEnvelope(fanOut.event, fanOut.data);
  const rows = await sequelize.query<FannedOutEvent>(SINGLE_EVENT, {
    bind: [fanOut.event, body, fanOut.ownerUserId, activeTraceparent(), fanOut.kind, fanOut.aboutEndpointId ?? null],
    type: QueryTypes.SELECT,
    transaction,
  });
  const jobs = rows.length === 0 ? [] : jobsOfEvent(rows[0]);
  annotateActiveSpan({ [WEBHOOK_EVENT]: fanOut.event, [WEBHOOK_IDS]: jobs.map((job) => job.deliveryId) });
  return jobs;
}

/**
 * The one statement builder of event and delivery rows: CTEs writing a batch of events (their
 * `webhook_events` rows) and their outbox rows, in the same statement as whatever else it
 * holds (a group commit of creates needs no BEGIN/COMMIT then: one statement is atomic).
 * Append them, after a comma, to a WITH whose earlier CTE `source` has one row per event:
 * `ord` (bigint, unique per event), `kind` (text, see {@link EventFanOut.kind}), `event` (text),
 * `owner_id` (int; see {@link EventFanOut.ownerUserId}), `about_id` (int or NULL; see
 * {@link EventFanOut.aboutEndpointId}), `traceparent` (text or NULL) and `body` (its
 * docs/design.md §7 envelope). Each event's row belongs to its owner; one outbox row per
 * endpoint that receives the event (subscription.ts: active, subscribed, operator or the
 * owner's own, filter, not the endpoint it is about), belonging to the endpoint's owner
 * (`user_id`, null for an operator endpoint), `enqueued_at` NULL (the caller queues them after
 * commit, or the outbox relay does). They define `fan_by_event`: per `ord` with deliveries,
 * `delivery_ids` and `endpoint_ids` in endpoint id order; read them with {@link jobsOfEvent}.
 */
export function eventRowsClauses(): string {
  // Each CTE holding new ids is read twice, so PostgreSQL materialises it: each id is drawn once.
  // An event's deliveries are made at its millisecond: all its rows share one day partition (docs/design.md §3).
  return `ev AS MATERIALIZED (
       SELECT s.*, ${newIdSql('evt_')} AS event_id FROM source s
     ), ev_written AS (
       INSERT INTO webhook_events (id, created_at, kind, event, body, user_id)
       SELECT event_id, webhook_id_time(event_id), kind, event, body, owner_id FROM ev ORDER BY ord
     ), fan AS MATERIALIZED (
       SELECT ${newIdAtSql('msg_', 'webhook_id_time(s.event_id)')} AS id, webhook_id_time(s.event_id) AS created_at,
              ep.id AS endpoint_id, ep.url, s.event_id, s.event, ep.user_id, s.traceparent, s.ord
         FROM ev s
         JOIN webhook_endpoints ep
           ON ${receivesEvent('ep', { kind: 's.kind', event: 's.event', owner: 's.owner_id', body: 's.body', about: 's.about_id' })}
     ), fan_written AS (
       INSERT INTO webhook_deliveries (id, created_at, event_id, endpoint_id, url, event, user_id, traceparent)
       SELECT id, created_at, event_id, endpoint_id, url, event, user_id, traceparent FROM fan ORDER BY ord, endpoint_id
     ), fan_by_event AS (
       SELECT ord, array_agg(id ORDER BY endpoint_id) AS delivery_ids, array_agg(endpoint_id ORDER BY endpoint_id) AS endpoint_ids
         FROM fan GROUP BY ord
     )`;
}

// One event of $1 name, $2 body (its exact bytes), $3 owner, $4 traceparent, $5 kind, $6 the endpoint it is about.
const SINGLE_EVENT = `WITH source AS (
       SELECT 1::bigint AS ord, $5::text AS kind, $1::text AS event, $3::int AS owner_id, $6::int AS about_id, $4::text AS traceparent, $2::text AS body
     ), ${eventRowsClauses()}
     SELECT delivery_ids, endpoint_ids FROM fan_by_event`;

/** One event's row of `fan_by_event` (see {@link eventRowsClauses}); both null when nobody subscribes. */
export interface FannedOutEvent {
  delivery_ids: string[] | null;
  endpoint_ids: number[] | null;
}

/** The jobs to add for one event written by {@link eventRowsClauses}, with their endpoints' gate keys. */
export function jobsOfEvent(row: FannedOutEvent): DeliveryJob[] {
  const endpointIds = row.endpoint_ids ?? [];
  return (row.delivery_ids ?? []).map((deliveryId, index) => ({ deliveryId, gate: endpointGateKey(endpointIds[index]) }));
}
