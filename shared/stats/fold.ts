import { QueryTypes, type Sequelize } from 'sequelize';

/**
 * The counts' upkeep (docs/design.md §3, §14): the fold of the appended deltas into the minute
 * and hour rows, and their retention with the attempt log's days.
 */

/** Delta rows folded per statement. */
const FOLD_BATCH = 10_000;

// One statement: the deltas it deletes are the ones it adds, so a crash folds each exactly
// once (all or nothing), and two folders at once take disjoint rows (SKIP LOCKED). Each delta
// goes to its minute row, its ten-minute row and its hour row.
const FOLD = `
  WITH moved AS (
    DELETE FROM webhook_stats_deltas
     WHERE ctid = ANY (ARRAY(SELECT ctid FROM webhook_stats_deltas LIMIT $1 FOR UPDATE SKIP LOCKED))
    RETURNING *
  ), per_bucket AS (
    SELECT m.endpoint_id, s.span_minutes, date_bin(s.span_minutes * interval '1 minute', m.minute, timestamptz 'epoch') AS start, m.bucket,
           sum(m.succeeded) AS succeeded, sum(m.retried) AS retried, sum(m.failed) AS failed, sum(m.cancelled) AS cancelled,
           count(m.bucket) AS n
      FROM moved m CROSS JOIN (VALUES (1::smallint), (10::smallint), (60::smallint)) AS s(span_minutes)
     GROUP BY 1, 2, 3, 4
  ), counts AS (
    INSERT INTO webhook_stats AS w (endpoint_id, span_minutes, start, succeeded, retried, failed, cancelled, durations)
    SELECT endpoint_id, span_minutes, start, sum(succeeded), sum(retried), sum(failed), sum(cancelled),
           COALESCE(string_agg(bucket || ':' || n, ' ' ORDER BY bucket) FILTER (WHERE bucket IS NOT NULL), '')
      FROM per_bucket GROUP BY 1, 2, 3
    ON CONFLICT (endpoint_id, span_minutes, start) DO UPDATE
       SET succeeded = w.succeeded + excluded.succeeded, retried = w.retried + excluded.retried,
           failed = w.failed + excluded.failed, cancelled = w.cancelled + excluded.cancelled,
           durations = CASE WHEN excluded.durations = '' THEN w.durations ELSE webhook_durations_merge(w.durations, excluded.durations) END
  ), last AS (
    INSERT INTO webhook_stats_last AS l (endpoint_id, last_success_at, last_failure_at)
    SELECT endpoint_id, max(success_at), max(failure_at) FROM moved GROUP BY endpoint_id
    HAVING max(success_at) IS NOT NULL OR max(failure_at) IS NOT NULL
    ON CONFLICT (endpoint_id) DO UPDATE
       SET last_success_at = GREATEST(l.last_success_at, excluded.last_success_at),
           last_failure_at = GREATEST(l.last_failure_at, excluded.last_failure_at)
  )
  SELECT count(*)::int AS n FROM moved`;

/**
 * Folds every delta row written so far into webhook_stats (minute, ten-minute and hour rows) and webhook_stats_last, in
 * statements of up to 10,000 rows. Reads are exact whether or not a delta is folded yet (they
 * add the unfolded ones); folding keeps what they add small.
 *
 * @returns the delta rows folded
 * @throws the database's error, when a statement fails (what it had taken stays to fold)
 */
export async function foldStats(sequelize: Sequelize): Promise<number> {
  let total = 0;
  for (;;) {
    const [row] = await sequelize.query<{ n: number }>(FOLD, { bind: [FOLD_BATCH], type: QueryTypes.SELECT });
    total += row.n;
    if (row.n < FOLD_BATCH) return total;
  }
}

/**
 * Drops the counts of the UTC days wholly before `windowStart`, as the attempt log's days are
 * dropped (the last success and failure stay), and the portal links and sessions expired:
 * sessions past `expires_at`, and links past theirs that no live session still comes from.
 *
 * @returns the count rows and the portal links and sessions removed
 */
export async function pruneStatsAndPortal(sequelize: Sequelize, windowStart: Date): Promise<{ stats: number; portalLinks: number; portalSessions: number }> {
  const [row] = await sequelize.query<{ stats: number; links: number; sessions: number }>(
    `WITH bound AS (SELECT date_bin('1 day', $1::timestamptz, timestamptz 'epoch') AS day),
          stats AS (DELETE FROM webhook_stats WHERE start < (SELECT day FROM bound) RETURNING 1),
          marks AS (DELETE FROM webhook_stats_failed WHERE minute < (SELECT day FROM bound)),
          deltas AS (DELETE FROM webhook_stats_deltas WHERE minute < (SELECT day FROM bound)),
          sessions AS (DELETE FROM portal_sessions WHERE expires_at < now() RETURNING link_id),
          links AS (
            DELETE FROM portal_links l WHERE l.expires_at < now()
               AND NOT EXISTS (SELECT 1 FROM portal_sessions s WHERE s.link_id = l.id AND s.expires_at >= now())
            RETURNING 1)
     SELECT (SELECT count(*) FROM stats)::int AS stats, (SELECT count(*) FROM links)::int AS links, (SELECT count(*) FROM sessions)::int AS sessions`,
    { bind: [windowStart], type: QueryTypes.SELECT },
  );
  return { stats: row.stats, portalLinks: row.links, portalSessions: row.sessions };
}
