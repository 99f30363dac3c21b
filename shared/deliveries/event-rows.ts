import { endpointGateKey } from '../endpoint-gate/gate-keys';
import { newIdAtSql, newIdSql } from './ids';
import { receivesEvent } from './subscription';
import type { JobToAdd } from '../queue/webhook-queue';

/**
 * What made an event (docs/design.md §3.2 `webhook_events.kind`): a post change, a fan-out of
 * `POST /api/v1/events`, an ad-hoc send, an endpoint test, an operational event such as
 * `endpoint.disabled` (§6.6; rows made before it say `notice`). Replay (§14.1) considers
 * post changes and fan-outs only.
 */
export type EventKind = 'post' | 'fan-out' | 'send' | 'test' | 'operational';

/**
 * Which rows {@link eventRowsClauses} writes.
 * - `events`: `new` writes each event's `webhook_events` row; `stored` names events written
 *   before (a replay) and writes their deliveries only.
 * - `targets`: `subscribed` writes one delivery per endpoint that receives the event
 *   (subscription.ts); `given` one delivery per event, to the target its source row names
 *   (an ad-hoc send, an endpoint test, the library's enqueue, a replay to its endpoint).
 */
export type EventRowsShape = { events: 'new'; targets: 'subscribed' | 'given' } | { events: 'stored'; targets: 'given' };

/** A fan-out: new events, to the endpoints subscribed to them. */
export const FAN_OUT: EventRowsShape = { events: 'new', targets: 'subscribed' };

/**
 * The columns of a delivery sent as its endpoint is set up (its own secret, headers and
 * signature scheme, read by the worker at each attempt), for the endpoint row `ep`: the
 * target columns a `given` source row holds for a delivery to an endpoint (see
 * {@link eventRowsClauses}).
 *
 * @param ep - the alias of a `webhook_endpoints` row in the statement
 */
export function endpointTargetSql(ep: string): string {
  return `${ep}.id AS endpoint_id, ${ep}.url, ${ep}.user_id, ${ENDPOINT_SETTINGS}`;
}

// What the worker reads as "the endpoint's own": the columns' defaults, spelt out so every
// delivery row is written by one column list.
const ENDPOINT_SETTINGS = `'POST'::text AS method, '{}'::jsonb AS headers, NULL::text AS secret, 'sha256'::text AS algo, 'X-Signature'::text AS signature_header`;

/**
 * The one statement builder of event and delivery rows, whatever makes them (a post change, a
 * `POST /events` fan-out, an operational event, an ad-hoc send, an endpoint test, the library's
 * enqueue, a replay): CTEs writing a batch of events and their outbox rows, in the same
 * statement as whatever else it holds (a group commit of creates needs no BEGIN/COMMIT then:
 * one statement is atomic). A single event is a batch of one.
 *
 * Append them, after a comma, to a WITH whose earlier CTE `source` has one row per event:
 * - always `ord` (bigint, unique per event), `event` (text) and `traceparent` (text or NULL;
 *   the writing request's trace, so a revived job still joins it);
 * - `new` events: `kind` (text, {@link EventKind}), `owner_id` (int or NULL: the user whose
 *   own endpoints also receive it, recorded on the event) and `body` (its docs/design.md §7
 *   envelope, the exact bytes every delivery sends); with `subscribed` targets also `about_id`
 *   (int or NULL: the endpoint an operational event is about, which never receives it);
 * - `stored` events: `event_id` (text);
 * - `given` targets: `delivery_id` (text: the webhook-id, made at the time the new event is
 *   made at; NULL draws one now, for `stored` events only), `endpoint_id` (int or NULL),
 *   `url`, `user_id` (int or NULL: the delivery's owner), `method`, `headers` (jsonb),
 *   `secret` (text or NULL), `algo` and `signature_header` ({@link endpointTargetSql} for an
 *   endpoint).
 *
 * A new event gets a new `evt_` id; its deliveries are made at its millisecond, so all its rows
 * share one day partition (docs/design.md §3.4): a given `delivery_id` fixes that millisecond,
 * else the event is made now. A delivery to a stored event is made now, in today's partition;
 * the worker reads the older event's body by that event's own key. Each event's row belongs
 * to its owner; each delivery is `pending` with `enqueued_at` NULL (the caller queues it after
 * commit, or the outbox relay does); a subscribed endpoint's delivery belongs to the
 * endpoint's owner (`user_id`, NULL for an operator endpoint).
 *
 * They define `ev` (the source rows with their `event_id`), `fan` (one row per delivery:
 * `id`, `ord`, `endpoint_id`, ...) and `fan_by_event`: per `ord` with deliveries,
 * `delivery_ids` and `endpoint_ids` in endpoint id order; read it with {@link jobsOfEvent}.
 */
export function eventRowsClauses(shape: EventRowsShape = FAN_OUT): string {
  // Each CTE holding new ids is read twice, so PostgreSQL materialises it: each id is drawn once.
  const given = shape.targets === 'given';
  const eventId = shape.events === 'stored' ? '' : `, ${given ? newIdAtSql('evt_', 'webhook_id_time(s.delivery_id)') : newIdSql('evt_')} AS event_id`;
  const eventsWritten =
    shape.events === 'stored'
      ? ''
      : `, ev_written AS (
       INSERT INTO webhook_events (id, created_at, kind, event, body, user_id)
       SELECT event_id, webhook_id_time(event_id), kind, event, body, owner_id FROM ev ORDER BY ord
     )`;
  // OFFSET 0 keeps the ORDER BY below the id draws: they are made in event order.
  const fan = given
    ? `SELECT d.*, webhook_id_time(d.id) AS created_at FROM (
         SELECT COALESCE(s.delivery_id, ${newIdSql('msg_')}) AS id, s.endpoint_id, s.url, s.user_id, s.method, s.headers, s.secret, s.algo,
                s.signature_header, s.event_id, s.event, s.traceparent, s.ord
           FROM ev s ORDER BY s.ord OFFSET 0
       ) d`
    : `SELECT ${newIdAtSql('msg_', 'webhook_id_time(s.event_id)')} AS id, webhook_id_time(s.event_id) AS created_at,
              ${endpointTargetSql('ep')}, s.event_id, s.event, s.traceparent, s.ord
         FROM ev s
         JOIN webhook_endpoints ep
           ON ${receivesEvent('ep', { kind: 's.kind', event: 's.event', owner: 's.owner_id', body: 's.body', about: 's.about_id' })}`;
  return `ev AS MATERIALIZED (
       SELECT s.*${eventId} FROM source s
     )${eventsWritten}, fan AS MATERIALIZED (
       ${fan}
     ), fan_written AS (
       INSERT INTO webhook_deliveries (id, created_at, event_id, endpoint_id, url, event, user_id, traceparent, method, headers, secret, algo, signature_header)
       SELECT id, created_at, event_id, endpoint_id, url, event, user_id, traceparent, method, headers, secret, algo, signature_header
         FROM fan ORDER BY ord, endpoint_id
     ), fan_by_event AS (
       SELECT ord, array_agg(id ORDER BY endpoint_id) AS delivery_ids, array_agg(endpoint_id ORDER BY endpoint_id) AS endpoint_ids
         FROM fan GROUP BY ord
     )`;
}

/** One event's row of `fan_by_event` (see {@link eventRowsClauses}); both null when nobody subscribes. */
export interface FannedOutEvent {
  delivery_ids: string[] | null;
  endpoint_ids: number[] | null;
}

/** The jobs to add for one event written by {@link eventRowsClauses}, with their endpoints' gate keys. */
export function jobsOfEvent(row: FannedOutEvent): JobToAdd[] {
  const endpointIds = row.endpoint_ids ?? [];
  return (row.delivery_ids ?? []).map((deliveryId, index) => ({ deliveryId, gate: endpointGateKey(endpointIds[index]) }));
}
