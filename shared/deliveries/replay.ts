import { QueryTypes, Transaction, type Sequelize } from 'sequelize';
import { endpointTargetSql, eventRowsClauses } from './event-rows';
import { receivesEvent } from './subscription';

// The endpoint's row is locked by a statement of its own, before REPLAY: under READ COMMITTED
// each statement reads a snapshot taken when it starts, so REPLAY then sees every delivery a
// replay that held the lock before committed (docs/design.md §3.5: one delivery per event and
// endpoint). Locked inside REPLAY itself, the wait for the lock would come after its snapshot,
// and two replays arriving together would both insert. A fan-out writes its event and that
// event's deliveries in one commit, so REPLAY sees either both or neither.
const LOCK_ENDPOINT = `SELECT id FROM webhook_endpoints WHERE id = $1 AND deleted_at IS NULL FOR UPDATE`;

// A delivery is never older than its event, so `d.created_at >= $2` bounds the partitions the
// check reads. Which events the endpoint receives is the fan-out's own rule (subscription.ts),
// applied to the endpoint as it is now. The rows are event-rows.ts's: stored events, each to
// the endpoint, sent as it is set up.
const REPLAY = `
  WITH ep AS (
    SELECT * FROM webhook_endpoints WHERE id = $1 AND deleted_at IS NULL
  ), source AS (
    SELECT row_number() OVER (ORDER BY e.created_at, e.id) AS ord, e.id AS event_id, e.event, NULL::text AS traceparent,
           NULL::text AS delivery_id, ${endpointTargetSql('ep')}
      FROM webhook_events e CROSS JOIN ep
     WHERE e.kind IN ('post', 'fan-out') AND e.created_at >= $2
       AND ${receivesEvent('ep', { kind: 'e.kind', event: 'e.event', owner: 'e.user_id', body: 'e.body' })}
       AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id AND d.endpoint_id = ep.id AND d.created_at >= $2)
     ORDER BY e.created_at, e.id
     LIMIT $3
  ), ${eventRowsClauses({ events: 'stored', targets: 'given' })}
  SELECT id FROM fan ORDER BY ord`;

/**
 * Writes one delivery, `pending` with `enqueued_at` NULL, for every post change or fan-out
 * event made at or after `since` that the endpoint would receive now (its events, filter and
 * owner) and has no delivery row of any status for, oldest first, at most `limit` (docs/design.md §14.1).
 * Committed when it returns; nothing for a deleted endpoint. Who may ask, and the window, are
 * the caller's checks (shared/operations).
 *
 * @returns the new delivery ids (webhook-ids), oldest event first
 */
export async function insertReplayDeliveries(sequelize: Sequelize, endpointId: number, since: Date, limit: number): Promise<string[]> {
  const rows = await sequelize.transaction({ isolationLevel: Transaction.ISOLATION_LEVELS.READ_COMMITTED }, async (transaction) => {
    await sequelize.query(LOCK_ENDPOINT, { bind: [endpointId], type: QueryTypes.SELECT, transaction });
    return sequelize.query<{ id: string }>(REPLAY, { bind: [endpointId, since, limit], type: QueryTypes.SELECT, transaction });
  });
  return rows.map((row) => row.id);
}
