import { QueryTypes, Sequelize, Transaction } from 'sequelize';
import { isoTimeSql } from '../db/iso-time-sql';
import { EPISODE_COLUMNS, EpisodeRow, disabledSet, endpointEventData } from './episodes';
import { insertOperationalEvent } from './operational-events';

/** SQL expressions of the attempt that may disable an endpoint, for {@link disablesEndpoint}. */
export interface DisableTerms {
  /** Whether the attempt succeeded (boolean). */
  succeeded: string;
  /** The 410 Gone reason, or NULL (text). */
  goneReason: string;
  /** WEBHOOK_DISABLE_AFTER_S (integer). */
  disableAfterS: string;
}

/**
 * Whether the attempt disables endpoint row `e` (docs/design.md §6.4): it is active, and the attempt
 * got 410 Gone, or failed while the endpoint has been failing, and unchanged, for longer
 * than WEBHOOK_DISABLE_AFTER_S.
 *
 * @returns an SQL boolean expression
 */
export function disablesEndpoint(e: string, terms: DisableTerms): string {
  const after = `now() - ${terms.disableAfterS} * interval '1 second'`;
  return `${e}.active AND (${terms.goneReason} IS NOT NULL OR (NOT ${terms.succeeded}
    AND ${e}.failing_since <= ${after} AND ${e}.updated_at <= ${after}))`;
}

// The condition is checked again under the row's lock: of two workers that both saw it
// hold, or of a success that came between, only the first to commit decides. The disable is
// part of the endpoint's failure episode (shared/deliveries/episodes.ts).
const DISABLE = `
  UPDATE webhook_endpoints e
     SET active = false, ${disabledSet('e')}, updated_at = now(),
         disabled_reason = COALESCE($2::text, 'No successful attempt since '
           || ${isoTimeSql('e.failing_since')} || ' (WEBHOOK_DISABLE_AFTER_S=' || $3::int
           || '); disabled at ' || ${isoTimeSql('now()')})
   WHERE e.id = $1 AND ($4::int IS NULL OR e.origin_epoch = $4) AND ${disablesEndpoint('e', { succeeded: 'false', goneReason: '$2::text', disableAfterS: '$3::int' })}
  RETURNING ${EPISODE_COLUMNS('e')}, e.disabled_reason, e.updated_at`;

/** What {@link disableEndpoint} did. */
export interface DisableResult {
  /** The `disabled_reason` written; null when the endpoint was not disabled after all. */
  disabledReason: string | null;
  /** The `endpoint.disabled` deliveries written with it (queue them). */
  noticeIds: string[];
}

/**
 * Disables an endpoint whose failed attempt was found to disable it (docs/design.md §6.4), and in the
 * same transaction emits `endpoint.disabled` through the ordinary fan-out (an operational
 * event, docs/design.md §6.6), data as the other endpoint events have it (episodes.ts
 * `endpointEventData`, `reason` the `disabled_reason`) and `disabled_at`.
 *
 * @param input.goneReason - the 410 Gone reason, or null for a disable by time
 * @param input.originEpoch - the origin epoch the failed attempt started with: an endpoint
 *   that moved to another origin since is not disabled; null: whatever its epoch
 * @param input.disableAfterS - WEBHOOK_DISABLE_AFTER_S
 * @param transaction - the transaction to write in (one that recorded the attempt); else its own
 * @throws the database's errors (nothing is written then)
 */
export async function disableEndpoint(
  sequelize: Sequelize,
  input: { endpointId: number; goneReason: string | null; disableAfterS: number; originEpoch: number | null },
  transaction?: Transaction,
): Promise<DisableResult> {
  if (!transaction) return sequelize.transaction((own) => disableEndpoint(sequelize, input, own));
  const [endpoint] = await sequelize.query<EpisodeRow & { disabled_reason: string; updated_at: Date }>(DISABLE, {
    bind: [input.endpointId, input.goneReason, input.disableAfterS, input.originEpoch],
    type: QueryTypes.SELECT,
    transaction,
  });
  if (!endpoint) return { disabledReason: null, noticeIds: [] };
  const jobs = await insertOperationalEvent(
    sequelize,
    transaction,
    'endpoint.disabled',
    { id: endpoint.id, userId: endpoint.user_id },
    { ...endpointEventData(endpoint, endpoint.disabled_reason), disabled_at: endpoint.updated_at.toISOString() },
  );
  return { disabledReason: endpoint.disabled_reason, noticeIds: jobs.map((job) => job.deliveryId) };
}
