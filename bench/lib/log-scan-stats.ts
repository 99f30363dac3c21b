import type { Client } from 'pg';

/**
 * The stats reads as they were made before the counts: scans of the attempt log over the
 * window, kept here only as the stats bench's baseline. Each function runs the statements one
 * read made (the 24-hour figures, then the series), as the operator sees them.
 */

const SERIES_STEPS = { '1h': ['1 minute', 60], '24h': ['1 hour', 24] } as const;

/** The attempts of the deliveries in `scope` per interval, by the outcome rules, with interpolated percentiles. */
async function readSeries(client: Client, scope: string, bind: unknown[], range: '1h' | '24h'): Promise<unknown[]> {
  const [step, buckets] = SERIES_STEPS[range];
  const values = [step, buckets, ...bind];
  const { rows } = await client.query(
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
        WHERE a.attempted_at >= (SELECT min(start) FROM buckets) AND ${scope}
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
    values,
  );
  return rows;
}

/** `GET /api/v1/stats?series=…` for an operator, from the log. */
export async function logScanOverview(client: Client, range: '1h' | '24h'): Promise<unknown> {
  const [{ rows }, series] = [
    await client.query(
      `WITH e AS (SELECT id, active FROM webhook_endpoints WHERE deleted_at IS NULL),
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
    ),
    await readSeries(client, `d.endpoint_id IN (SELECT id FROM webhook_endpoints WHERE deleted_at IS NULL)`, [], range),
  ];
  return { ...rows[0], series };
}

/** `GET /api/v1/endpoints/{id}/stats?series=…`, from the log. */
export async function logScanEndpoint(client: Client, endpointId: number, range: '1h' | '24h'): Promise<unknown> {
  const { rows } = await client.query(
    `SELECT count(*) FILTER (WHERE a.attempted_at > now() - interval '24 hours')::int AS attempts,
            count(*) FILTER (WHERE a.attempted_at > now() - interval '24 hours' AND a.status_code BETWEEN 200 AND 299)::int AS successes,
            percentile_cont(0.5) WITHIN GROUP (ORDER BY a.duration_ms) FILTER (WHERE a.attempted_at > now() - interval '24 hours') AS p50,
            percentile_cont(0.95) WITHIN GROUP (ORDER BY a.duration_ms) FILTER (WHERE a.attempted_at > now() - interval '24 hours') AS p95,
            max(a.attempted_at) FILTER (WHERE a.status_code BETWEEN 200 AND 299) AS last_success_at,
            max(a.attempted_at) FILTER (WHERE a.status_code IS NULL OR a.status_code NOT BETWEEN 200 AND 299) AS last_failure_at
       FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id
      WHERE d.endpoint_id = $1`,
    [endpointId],
  );
  return { ...rows[0], series: await readSeries(client, 'd.endpoint_id = $3', [endpointId], range) };
}
