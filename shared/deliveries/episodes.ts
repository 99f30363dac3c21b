import { QueryTypes, Sequelize, Transaction } from 'sequelize';
import type { JobToAdd } from '../queue/webhook-queue';
import { shownUrl } from '../http/url-display';
import { insertOperationalEvent } from './operational-events';

// An endpoint's failure episode (docs/design.md §6.6) lives in its webhook_endpoints row: open
// while `episode_id` is set (and `failing_since`, its start, as the table's CHECK requires),
// with `consecutive_failures`, the last failure's `last_failure_status_code` and
// `last_failure_error`, and `episode_events`, the operational events it emitted. Every change
// below is a conditional UPDATE, so of several workers, or of a circuit that opened again
// after Redis lost it, only one emits each event of an episode. This module is the only
// writer of those columns.

/** SQL expression of a new episode id: `epi_` and a UUIDv7, as webhook_new_id draws ids. */
const NEW_EPISODE_ID = `webhook_new_id('epi_')`;

/**
 * The SET list that counts one failed attempt (any answer but a 2xx, or none) on endpoint row
 * `e`: opens an episode when none is open, and records the attempt as the episode's last.
 *
 * @param terms.statusCode - the attempt's HTTP status or NULL (an SQL integer expression)
 * @param terms.error - the attempt's error or NULL (an SQL text expression)
 */
export function failedAttemptSet(e: string, terms: { statusCode: string; error: string }): string {
  return `episode_id = COALESCE(${e}.episode_id, ${NEW_EPISODE_ID}), failing_since = COALESCE(${e}.failing_since, now()),
         consecutive_failures = ${e}.consecutive_failures + 1,
         last_failure_status_code = ${terms.statusCode}, last_failure_error = ${terms.error}`;
}

/**
 * The SET list of the system disabling endpoint row `e` (its attempt already counted by
 * {@link failedAttemptSet}): the episode notes that it emitted `endpoint.disabled`, so that a
 * re-enable or a later success emits `endpoint.recovered`.
 */
export function disabledSet(e: string): string {
  return `episode_id = COALESCE(${e}.episode_id, ${NEW_EPISODE_ID}), failing_since = COALESCE(${e}.failing_since, now()),
         episode_events = array_append(${e}.episode_events, 'endpoint.disabled')`;
}

/** What the endpoint events' data is made of: columns of `webhook_endpoints` and the time of the change. */
export const EPISODE_COLUMNS = (e: string): string =>
  `${e}.id, ${e}.url, ${e}.user_id, ${e}.episode_id, ${e}.failing_since, ${e}.consecutive_failures,
   ${e}.last_failure_status_code, ${e}.last_failure_error, now() AS occurred_at`;

/** A row of {@link EPISODE_COLUMNS}. */
export interface EpisodeRow {
  id: number;
  url: string;
  user_id: number | null;
  episode_id: string;
  failing_since: Date;
  consecutive_failures: number;
  last_failure_status_code: number | null;
  last_failure_error: string | null;
  occurred_at: Date;
}

/**
 * The data of an endpoint event (docs/design.md §6.6), in the order the design lists it:
 * `{endpoint_id, url, user_id, reason, failing_since, consecutive_failures, last_status_code,
 * last_error, occurred_at, episode_id}`. `url` is shown without userinfo or query string;
 * `last_status_code` and `last_error` are the episode's last failed attempt's; times are ISO
 * 8601 UTC.
 */
export function endpointEventData(row: EpisodeRow, reason: string): Record<string, unknown> {
  return {
    endpoint_id: row.id,
    url: shownUrl(row.url),
    user_id: row.user_id,
    reason,
    failing_since: row.failing_since.toISOString(),
    consecutive_failures: row.consecutive_failures,
    last_status_code: row.last_failure_status_code,
    last_error: row.last_failure_error,
    occurred_at: row.occurred_at.toISOString(),
    episode_id: row.episode_id,
  };
}

const MARK_FAILING = `
  UPDATE webhook_endpoints e SET episode_events = array_append(e.episode_events, 'endpoint.failing')
   WHERE e.id = $1 AND ($2::int IS NULL OR e.origin_epoch = $2) AND e.active AND e.episode_id IS NOT NULL
     AND NOT ('endpoint.failing' = ANY(e.episode_events))
  RETURNING ${EPISODE_COLUMNS('e')}`;

/**
 * `endpoint.failing` (docs/design.md §6.6), after the endpoint's circuit opened: the first time in
 * the open episode it is written, with the mark that it was, in one transaction; any later
 * opening in the episode (a failed probe, a circuit Redis forgot and opened again, another
 * worker's) writes nothing. An endpoint with no open episode (a success came between) or
 * inactive gets nothing either, nor one that moved to another origin since the circuit's
 * attempts started (its `origin_epoch` is no longer `originEpoch`).
 *
 * @param originEpoch - the origin epoch of the circuit that opened; null: whatever the endpoint's
 * @returns the jobs of the event's deliveries, to add once this returned (committed)
 */
export async function announceFailing(sequelize: Sequelize, endpointId: number, originEpoch: number | null): Promise<JobToAdd[]> {
  return sequelize.transaction(async (transaction) => {
    const [row] = await sequelize.query<EpisodeRow>(MARK_FAILING, { bind: [endpointId, originEpoch], type: QueryTypes.SELECT, transaction });
    if (!row) return [];
    const reason = `circuit opened after ${row.consecutive_failures} consecutive failed attempt${row.consecutive_failures === 1 ? '' : 's'}`;
    return insertOperationalEvent(sequelize, transaction, 'endpoint.failing', { id: row.id, userId: row.user_id }, endpointEventData(row, reason));
  });
}

// Locked first, by a statement of its own: of two closings at once the second waits, then
// finds the episode closed (READ COMMITTED checks the condition again on the new row).
const LOCK_EPISODE = `
  SELECT ${EPISODE_COLUMNS('e')}, e.episode_events
    FROM webhook_endpoints e
   WHERE e.id = $1 AND e.episode_id IS NOT NULL AND ($2::text IS NULL OR e.episode_id = $2)
     FOR UPDATE`;

const CLOSE_EPISODE = `
  UPDATE webhook_endpoints
     SET episode_id = NULL, failing_since = NULL, consecutive_failures = 0, episode_events = '{}'
   WHERE id = $1`;

/**
 * Closes the endpoint's open episode (docs/design.md §6.6), inside `transaction`: at a success, or
 * at a re-enable. When the episode emitted `endpoint.failing` or `endpoint.disabled`, it also
 * writes `endpoint.recovered`, so one episode gives at most one.
 *
 * @param input.episodeId - close only this episode (a success seen in it); absent: whatever is open (a re-enable)
 * @param input.reason - the `reason` of `endpoint.recovered`
 * @returns the jobs of the `endpoint.recovered` deliveries, to add after commit; none when no
 *   episode was open or it had emitted nothing
 */
export async function closeEpisode(
  sequelize: Sequelize,
  transaction: Transaction,
  input: { endpointId: number; episodeId?: string; reason: string },
): Promise<JobToAdd[]> {
  const [row] = await sequelize.query<EpisodeRow & { episode_events: string[] }>(LOCK_EPISODE, {
    bind: [input.endpointId, input.episodeId ?? null],
    type: QueryTypes.SELECT,
    transaction,
  });
  if (!row) return [];
  await sequelize.query(CLOSE_EPISODE, { bind: [input.endpointId], transaction });
  if (!row.episode_events.some((event) => event === 'endpoint.failing' || event === 'endpoint.disabled')) return [];
  return insertOperationalEvent(sequelize, transaction, 'endpoint.recovered', { id: row.id, userId: row.user_id }, endpointEventData(row, input.reason));
}
