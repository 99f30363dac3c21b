/**
 * One event as SQL expressions of the statement that asks {@link receivesEvent}, such as
 * placeholders (`$1::text`) or columns of a joined event row (`e.event`).
 */
export interface EventTerms {
  /** The event's `webhook_events.kind` (text). */
  kind: string;
  /** The event's name (text). */
  event: string;
  /** The user whose own endpoints also receive it (integer; NULL: operator endpoints only). */
  owner: string;
  /** The event's body (text), the docs/design.md §7 envelope: filters are matched against its `_data`. */
  body: string;
  /** The endpoint an operational event is about (integer), which never receives it. */
  about?: string;
}

/**
 * Whether the endpoint row `ep` (an alias of `webhook_endpoints`, or of a row with its
 * columns) receives the event: the one rule of which endpoints get an event, used by the
 * fan-outs of every kind, by replay and by operational events alike.
 * - active (a deleted endpoint is inactive too);
 * - subscribed: its `events` lists the event's name, or is empty, which means every event
 *   except the operational ones (docs/design.md §6.6: an upgrade must not send new kinds of
 *   events to receivers that never asked);
 * - owned: an operator endpoint (`user_id` NULL) receives the events of every user, a user's
 *   endpoint only those of its own user: a post's owner, `POST /events`'s `user_id` (docs/design.md §6.2);
 * - its `filter` (docs/design.md §14.1) matches the envelope's `_data`, the same data fan-out, replay
 *   and the receiver see; a filter of the wrong shape matches nothing and never raises;
 * - not the endpoint the event is about.
 *
 * @param ep - the alias of the endpoint row in the statement, such as `ep`
 * @returns an SQL boolean expression
 */
export function receivesEvent(ep: string, terms: EventTerms): string {
  const about = terms.about === undefined ? '' : ` AND ${ep}.id IS DISTINCT FROM ${terms.about}`;
  return `${ep}.active
       AND (${terms.event} = ANY(${ep}.events) OR (cardinality(${ep}.events) = 0 AND ${terms.kind} <> 'operational'))
       AND (${ep}.user_id IS NULL OR ${ep}.user_id = ${terms.owner})
       AND (${ep}.filter IS NULL OR webhook_filter_matches(${ep}.filter, (${terms.body})::jsonb -> '_data'))${about}`;
}
