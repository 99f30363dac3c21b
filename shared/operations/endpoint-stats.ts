import { QueryTypes } from 'sequelize';
import type { Database } from '../db';
import type { CircuitState } from '../endpoint-gate';
import { findVisibleEndpoint } from './endpoints';
import { EndpointNotFoundError } from './errors';
import type { Viewer } from './viewer';

/** The spans a `series` may cover (docs/design.md §14.1): the last hour by minute, the last 24 h by hour. */
export const SERIES_RANGES = ['1h', '24h'] as const;
export type SeriesRange = (typeof SERIES_RANGES)[number];

const SERIES_STEPS: Record<SeriesRange, { step: string; buckets: number }> = {
  '1h': { step: '1 minute', buckets: 60 },
  '24h': { step: '1 hour', buckets: 24 },
};

/**
 * The attempts of one interval (docs/design.md §14.1). Every attempt counts once, by its outcome:
 * `succeeded` a 2xx answer; `retried` any other answer or an error after which the delivery
 * was attempted again (a retry, a redelivery, a recovery) or still has an attempt to come;
 * `failed` any other answer or an error that was the delivery's last, the delivery given up.
 * Latencies are the attempts' durations, whole milliseconds, null without attempts.
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
 * are over the whole attempt log. `series` is there only when asked for.
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

/** Deliveries `d` of the endpoints in scope, as SQL; pushes its parameter onto `bind`. */
type AttemptScope = (bind: unknown[]) => string;

const ofEndpoint =
  (endpointId: number): AttemptScope =>
  (bind) =>
    `d.endpoint_id = $${bind.push(endpointId)}`;

/** Endpoints the viewer may list: not deleted, and a user's own. */
const visibleEndpoints = (viewer: Viewer, bind: unknown[]): string =>
  `SELECT id, active FROM webhook_endpoints WHERE deleted_at IS NULL${viewer.operator ? '' : ` AND user_id = $${bind.push(viewer.userId)}`}`;

const ofVisibleEndpoints =
  (viewer: Viewer): AttemptScope =>
  (bind) =>
    `d.endpoint_id IN (SELECT id FROM (${visibleEndpoints(viewer, bind)}) AS visible)`;

const roundMs = (value: number | null): number | null => (value === null ? null : Math.round(value));
const rate = (part: number, all: number): number | null => (all === 0 ? null : Math.round((part / all) * 10_000) / 10_000);

/**
 * Reads an endpoint's health, with its `series` when `series` is given.
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
  const [[row], circuit, buckets] = await Promise.all([
    db.sequelize.query<{
      attempts: number;
      successes: number;
      p50: number | null;
      p95: number | null;
      last_success_at: Date | null;
      last_failure_at: Date | null;
    }>(
      `SELECT count(*) FILTER (WHERE a.attempted_at > now() - interval '24 hours')::int AS attempts,
              count(*) FILTER (WHERE a.attempted_at > now() - interval '24 hours' AND a.status_code BETWEEN 200 AND 299)::int AS successes,
              percentile_cont(0.5) WITHIN GROUP (ORDER BY a.duration_ms) FILTER (WHERE a.attempted_at > now() - interval '24 hours') AS p50,
              percentile_cont(0.95) WITHIN GROUP (ORDER BY a.duration_ms) FILTER (WHERE a.attempted_at > now() - interval '24 hours') AS p95,
              max(a.attempted_at) FILTER (WHERE a.status_code BETWEEN 200 AND 299) AS last_success_at,
              max(a.attempted_at) FILTER (WHERE a.status_code IS NULL OR a.status_code NOT BETWEEN 200 AND 299) AS last_failure_at
         FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id
        WHERE d.endpoint_id = $1`,
      { bind: [endpointId], type: QueryTypes.SELECT },
    ),
    readCircuit(endpointId),
    series && readSeries(db, ofEndpoint(endpointId), series),
  ]);
  return {
    attempts_24h: row.attempts,
    success_rate_24h: rate(row.successes, row.attempts),
    p50_ms: roundMs(row.p50),
    p95_ms: roundMs(row.p95),
    last_success_at: row.last_success_at && new Date(row.last_success_at).toISOString(),
    last_failure_at: row.last_failure_at && new Date(row.last_failure_at).toISOString(),
    circuit,
    disabled_reason: endpoint.disabledReason,
    failing_since: endpoint.episodeId === null ? null : (endpoint.failingSince?.toISOString() ?? null),
    consecutive_failures: endpoint.episodeId === null ? null : endpoint.consecutiveFailures,
    ...(buckets && { series: buckets }),
  };
}

/**
 * Reads the health of all the endpoints the viewer may see (an operator: every endpoint; a
 * user: their own), with their `series` when `series` is given.
 */
export async function getOverviewStats(db: Database, viewer: Viewer, series?: SeriesRange): Promise<OverviewStats> {
  const bind: unknown[] = [];
  const [[row], buckets] = await Promise.all([
    db.sequelize.query<{ endpoints: number; disabled: number; attempts: number; successes: number; p50: number | null; p95: number | null }>(
      `WITH e AS (${visibleEndpoints(viewer, bind)}),
            a AS (SELECT a.status_code, a.duration_ms
                    FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id
                   WHERE d.endpoint_id IN (SELECT id FROM e) AND a.attempted_at > now() - interval '24 hours')
       SELECT (SELECT count(*) FROM e)::int AS endpoints,
              (SELECT count(*) FROM e WHERE NOT active)::int AS disabled,
              count(*)::int AS attempts,
              count(*) FILTER (WHERE status_code BETWEEN 200 AND 299)::int AS successes,
              percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms) AS p50,
              percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms) AS p95
         FROM a`,
      { bind, type: QueryTypes.SELECT },
    ),
    series && readSeries(db, ofVisibleEndpoints(viewer), series),
  ]);
  return {
    endpoints: row.endpoints,
    endpoints_disabled: row.disabled,
    attempts_24h: row.attempts,
    success_rate_24h: rate(row.successes, row.attempts),
    p50_ms: roundMs(row.p50),
    p95_ms: roundMs(row.p95),
    ...(buckets && { series: buckets }),
  };
}

/**
 * The attempts of the deliveries in `scope` per interval, oldest first, every interval of the
 * range present (zeros and null latencies when empty); the last is the current, partial one.
 * Intervals are aligned on UTC minutes or hours (date_bin from the epoch, whatever the
 * session's time zone). One statement: generate_series makes the intervals; an attempt is
 * `retried` when a later attempt of its delivery exists (every later attempt falls within the
 * range too, being later) or its delivery is still pending or in flight. It reads only
 * columns every layout of webhook_attempts has, bounded by `attempted_at`.
 */
async function readSeries(db: Database, scope: AttemptScope, range: SeriesRange): Promise<SeriesBucket[]> {
  const { step, buckets } = SERIES_STEPS[range];
  const bind: unknown[] = [step, buckets];
  const rows = await db.sequelize.query<{
    start: Date;
    succeeded: number;
    failed: number;
    retried: number;
    p50: number | null;
    p95: number | null;
  }>(
    `WITH buckets AS (
       SELECT generate_series(last - ($2::int - 1) * $1::interval, last, $1::interval) AS start
         FROM (SELECT date_bin($1::interval, now(), timestamptz 'epoch') AS last) AS now_bucket
     ), attempts AS (
       SELECT date_bin($1::interval, a.attempted_at, timestamptz 'epoch') AS start, a.duration_ms,
              CASE WHEN a.status_code BETWEEN 200 AND 299 THEN 'succeeded'
                   WHEN d.status IN ('pending', 'delivering')
                     OR lead(a.attempt_number) OVER (PARTITION BY a.delivery_id ORDER BY a.attempt_number) IS NOT NULL THEN 'retried'
                   ELSE 'failed' END AS outcome
         FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id
        WHERE a.attempted_at >= (SELECT min(start) FROM buckets) AND ${scope(bind)}
     )
     SELECT b.start,
            count(*) FILTER (WHERE a.outcome = 'succeeded')::int AS succeeded,
            count(*) FILTER (WHERE a.outcome = 'failed')::int AS failed,
            count(*) FILTER (WHERE a.outcome = 'retried')::int AS retried,
            percentile_cont(0.5) WITHIN GROUP (ORDER BY a.duration_ms) AS p50,
            percentile_cont(0.95) WITHIN GROUP (ORDER BY a.duration_ms) AS p95
       FROM buckets b LEFT JOIN attempts a ON a.start = b.start
      GROUP BY b.start
      ORDER BY b.start`,
    { bind, type: QueryTypes.SELECT },
  );
  return rows.map((row) => ({
    start: new Date(row.start).toISOString(),
    succeeded: row.succeeded,
    failed: row.failed,
    retried: row.retried,
    p50_ms: roundMs(row.p50),
    p95_ms: roundMs(row.p95),
  }));
}
