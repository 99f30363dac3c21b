import { QueryTypes } from 'sequelize';
import type { Database } from '../db';
import type { CircuitState } from '../endpoint-gate';
import { findVisibleEndpoint } from './endpoints';
import { EndpointNotFoundError } from './errors';
import type { Viewer } from './viewer';
import { durationPercentile, parseDurations } from '../stats/histogram';

/** The spans a `series` may cover (docs/design.md §14.1): the last hour by minute, the last 24 h by hour. */
export const SERIES_RANGES = ['1h', '24h'] as const;
export type SeriesRange = (typeof SERIES_RANGES)[number];

const SERIES_STEPS: Record<SeriesRange, { step: string; buckets: number; spanMinutes: number }> = {
  '1h': { step: '1 minute', buckets: 60, spanMinutes: 1 },
  '24h': { step: '1 hour', buckets: 24, spanMinutes: 60 },
};

/**
 * The attempts of one interval (docs/design.md §14.1). Every attempt counts once, by its outcome:
 * `succeeded` a 2xx answer; `retried` any other answer or an error after which the delivery
 * was attempted again (a retry, a redelivery, a recovery) or still has an attempt to come;
 * `failed` any other answer or an error that was the delivery's last, the delivery given up.
 * Latencies are the attempts' durations from the duration histogram (within 5%), whole
 * milliseconds, null without attempts.
 */
export interface SeriesBucket {
  /** The interval's start, ISO 8601 UTC, on a whole minute (1h) or hour (24h). */
  start: string;
  succeeded: number;
  failed: number;
  retried: number;
  p50_ms: number | null;
  p95_ms: number | null;
}

/**
 * An endpoint's health (docs/design.md §11.1). Rates and latencies cover the attempts of the last 24 h
 * and are null when there were none; `success_rate_24h` is a fraction from 0 to 1 (2xx
 * attempts over all attempts); latencies are whole milliseconds. The last success and failure
 * are the endpoint's latest ever, kept beyond the attempt log's retention. `series` is there
 * only when asked for.
 */
export interface EndpointStats {
  attempts_24h: number;
  success_rate_24h: number | null;
  p50_ms: number | null;
  p95_ms: number | null;
  last_success_at: string | null;
  last_failure_at: string | null;
  circuit: CircuitState;
  disabled_reason: string | null;
  /** The open failure episode's first failed attempt, ISO 8601 UTC; null when none is open. */
  failing_since: string | null;
  /** Failed attempts in the open episode, without a success between; null when none is open. */
  consecutive_failures: number | null;
  series?: SeriesBucket[];
}

/**
 * The health of every endpoint a viewer may see, together (docs/design.md §14.1's overview): how many
 * there are and how many are disabled, then the figures of {@link EndpointStats} over all
 * their attempts (deleted endpoints and ad-hoc sends excluded).
 */
export interface OverviewStats {
  endpoints: number;
  endpoints_disabled: number;
  attempts_24h: number;
  success_rate_24h: number | null;
  p50_ms: number | null;
  p95_ms: number | null;
  series?: SeriesBucket[];
}

/** Count rows of the endpoints in scope, as SQL over `column` (an endpoint id); pushes its parameters onto `bind`. */
type CountScope = (column: string, bind: unknown[]) => string;

const ofEndpoint =
  (endpointId: number): CountScope =>
  (column, bind) =>
    `${column} = $${bind.push(endpointId)}`;

/** Endpoints the viewer may list: not deleted, and a user's own. */
const visibleEndpoints = (viewer: Viewer, bind: unknown[]): string =>
  `SELECT id, active FROM webhook_endpoints WHERE deleted_at IS NULL${viewer.operator ? '' : ` AND user_id = $${bind.push(viewer.userId)}`}`;

const ofVisibleEndpoints =
  (viewer: Viewer): CountScope =>
  (column, bind) =>
    `${column} IN (SELECT id FROM (${visibleEndpoints(viewer, bind)}) AS visible)`;

const rate = (part: number, all: number): number | null => (all === 0 ? null : Math.round((part / all) * 10_000) / 10_000);

/** The attempts of a window, as the counts hold them: the histograms of its rows joined, merged here (cheaper than in SQL). */
interface WindowFigures {
  succeeded: number;
  retried: number;
  failed: number;
  durations: string | null;
}

// An unfolded delta as a count row: its attempt's duration bucket, or none for an outcome change.
const DELTA_DURATIONS = `CASE WHEN d.bucket IS NULL THEN '' ELSE d.bucket || ':1' END`;

/**
 * The figures of the last 1,440 whole minutes and the current one (docs/design.md §14) in
 * `scope`: the minute rows up to the first whole ten minutes, the ten-minute rows up to the
 * first whole hour, the hour rows from there (the current hour's included), and the deltas not
 * folded yet. Rows read: endpoints × at most 9 + 5 + 25.
 */
async function readWindow(db: Database, scope: CountScope): Promise<WindowFigures> {
  const bind: unknown[] = [];
  const rows = (span: number, from: string, to: string | null) =>
    `SELECT s.succeeded, s.retried, s.failed, s.durations FROM webhook_stats s
      WHERE ${scope('s.endpoint_id', bind)} AND s.span_minutes = ${span}
        AND s.start >= (SELECT ${from} FROM w)${to ? ` AND s.start < (SELECT ${to} FROM w)` : ''}`;
  const [row] = await db.sequelize.query<WindowFigures>(
    `WITH w AS MATERIALIZED (
       SELECT lo, date_bin('10 minutes', lo + interval '9 minutes', timestamptz 'epoch') AS t0,
              date_bin('1 hour', lo + interval '59 minutes', timestamptz 'epoch') AS h0
         FROM (SELECT date_bin('1 minute', now(), timestamptz 'epoch') - interval '1440 minutes' AS lo) AS x
     ), cells AS (
       ${rows(1, 'lo', 't0')}
       UNION ALL
       ${rows(10, 't0', 'h0')}
       UNION ALL
       ${rows(60, 'h0', null)}
       UNION ALL
       SELECT d.succeeded, d.retried, d.failed, ${DELTA_DURATIONS} FROM webhook_stats_deltas d
        WHERE ${scope('d.endpoint_id', bind)} AND d.minute >= (SELECT lo FROM w)
     )
     SELECT COALESCE(sum(succeeded), 0)::int AS succeeded, COALESCE(sum(retried), 0)::int AS retried, COALESCE(sum(failed), 0)::int AS failed,
            (SELECT string_agg(durations, ' ') FROM cells WHERE durations <> '') AS durations
       FROM cells`,
    { bind, type: QueryTypes.SELECT },
  );
  return row;
}

/** The 24-hour figures of the stats objects from a window's counts. */
function windowStats(figures: WindowFigures): Pick<EndpointStats, 'attempts_24h' | 'success_rate_24h' | 'p50_ms' | 'p95_ms'> {
  const attempts = figures.succeeded + figures.retried + figures.failed;
  const durations = parseDurations(figures.durations);
  return {
    attempts_24h: attempts,
    success_rate_24h: rate(figures.succeeded, attempts),
    p50_ms: durationPercentile(durations, 0.5),
    p95_ms: durationPercentile(durations, 0.95),
  };
}

/**
 * Reads an endpoint's health, with its `series` when `series` is given, from the counts
 * (docs/design.md §14): never from the attempt log.
 *
 * @param readCircuit - the circuit state of the endpoint, from the shared breaker in Redis
 * @throws EndpointNotFoundError when the viewer may not see it
 */
export async function getEndpointStats(
  db: Database,
  endpointId: number,
  viewer: Viewer,
  readCircuit: (endpointId: number) => Promise<CircuitState>,
  series?: SeriesRange,
): Promise<EndpointStats> {
  const endpoint = await findVisibleEndpoint(db, endpointId, viewer);
  if (!endpoint) throw new EndpointNotFoundError(endpointId);
  const [figures, [last], circuit, buckets] = await Promise.all([
    readWindow(db, ofEndpoint(endpointId)),
    db.sequelize.query<{ last_success_at: Date | null; last_failure_at: Date | null }>(
      `SELECT GREATEST((SELECT last_success_at FROM webhook_stats_last WHERE endpoint_id = $1),
                       (SELECT max(success_at) FROM webhook_stats_deltas WHERE endpoint_id = $1)) AS last_success_at,
              GREATEST((SELECT last_failure_at FROM webhook_stats_last WHERE endpoint_id = $1),
                       (SELECT max(failure_at) FROM webhook_stats_deltas WHERE endpoint_id = $1)) AS last_failure_at`,
      { bind: [endpointId], type: QueryTypes.SELECT },
    ),
    readCircuit(endpointId),
    series && readSeries(db, ofEndpoint(endpointId), series),
  ]);
  return {
    ...windowStats(figures),
    last_success_at: last.last_success_at && new Date(last.last_success_at).toISOString(),
    last_failure_at: last.last_failure_at && new Date(last.last_failure_at).toISOString(),
    circuit,
    disabled_reason: endpoint.disabledReason,
    failing_since: endpoint.episodeId === null ? null : (endpoint.failingSince?.toISOString() ?? null),
    consecutive_failures: endpoint.episodeId === null ? null : endpoint.consecutiveFailures,
    ...(buckets && { series: buckets }),
  };
}

/**
 * Reads the health of all the endpoints the viewer may see (an operator: every endpoint; a
 * user: their own), with their `series` when `series` is given, from the counts.
 */
export async function getOverviewStats(db: Database, viewer: Viewer, series?: SeriesRange): Promise<OverviewStats> {
  const bind: unknown[] = [];
  const [[row], figures, buckets] = await Promise.all([
    db.sequelize.query<{ endpoints: number; disabled: number }>(
      `WITH e AS (${visibleEndpoints(viewer, bind)})
       SELECT count(*)::int AS endpoints, (count(*) FILTER (WHERE NOT active))::int AS disabled FROM e`,
      { bind, type: QueryTypes.SELECT },
    ),
    readWindow(db, ofVisibleEndpoints(viewer)),
    series && readSeries(db, ofVisibleEndpoints(viewer), series),
  ]);
  return {
    endpoints: row.endpoints,
    endpoints_disabled: row.disabled,
    ...windowStats(figures),
    ...(buckets && { series: buckets }),
  };
}

/**
 * The attempts of the endpoints in `scope` per interval, oldest first, every interval of the
 * range present (zeros and null latencies when empty); the last is the current, partial one.
 * Intervals are aligned on UTC minutes or hours (date_bin from the epoch, whatever the
 * session's time zone). One statement over the count rows of the range's span (60 minute or
 * 24 hour rows per endpoint) and the deltas not folded yet, binned alike.
 */
async function readSeries(db: Database, scope: CountScope, range: SeriesRange): Promise<SeriesBucket[]> {
  const { step, buckets, spanMinutes } = SERIES_STEPS[range];
  const bind: unknown[] = [step, buckets, spanMinutes];
  const rows = await db.sequelize.query<{
    start: Date;
    succeeded: number;
    failed: number;
    retried: number;
    durations: string | null;
  }>(
    `WITH buckets AS (
       SELECT generate_series(last - ($2::int - 1) * $1::interval, last, $1::interval) AS start
         FROM (SELECT date_bin($1::interval, now(), timestamptz 'epoch') AS last) AS now_bucket
     ), cells AS (
       SELECT s.start, s.succeeded, s.retried, s.failed, s.durations FROM webhook_stats s
        WHERE s.span_minutes = $3::smallint AND s.start >= (SELECT min(start) FROM buckets) AND ${scope('s.endpoint_id', bind)}
       UNION ALL
       SELECT date_bin($1::interval, d.minute, timestamptz 'epoch'), d.succeeded, d.retried, d.failed, ${DELTA_DURATIONS}
         FROM webhook_stats_deltas d
        WHERE d.minute >= (SELECT min(start) FROM buckets) AND ${scope('d.endpoint_id', bind)}
     ), counts AS (
       SELECT start, sum(succeeded) AS succeeded, sum(retried) AS retried, sum(failed) AS failed FROM cells GROUP BY start
     ), histograms AS (
       SELECT start, string_agg(durations, ' ') AS durations FROM cells WHERE durations <> '' GROUP BY start
     )
     SELECT b.start, COALESCE(c.succeeded, 0)::int AS succeeded, COALESCE(c.failed, 0)::int AS failed,
            COALESCE(c.retried, 0)::int AS retried, h.durations
       FROM buckets b LEFT JOIN counts c ON c.start = b.start LEFT JOIN histograms h ON h.start = b.start
      ORDER BY b.start`,
    { bind, type: QueryTypes.SELECT },
  );
  return rows.map((row) => {
    const durations = parseDurations(row.durations);
    return {
      start: new Date(row.start).toISOString(),
      succeeded: row.succeeded,
      failed: row.failed,
      retried: row.retried,
      p50_ms: durationPercentile(durations, 0.5),
      p95_ms: durationPercentile(durations, 0.95),
    };
  });
}
