import { QueryTypes } from 'sequelize';
import type { Database } from '../db';
import type { CircuitState } from '../queue/circuit-breaker';
import { findVisibleEndpoint } from './endpoints';
import { EndpointNotFoundError } from './errors';
import type { Viewer } from './viewer';

/**
 * An endpoint's health (DESIGN §11). Rates and latencies cover the attempts of the last 24 h
 * and are null when there were none; `success_rate_24h` is a fraction from 0 to 1 (2xx
 * attempts over all attempts); latencies are whole milliseconds. The last success and failure
 * are over the whole attempt log.
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
}

/**
 * Reads an endpoint's health.
 *
 * @param readCircuit - the circuit state of the endpoint, from the shared breaker in Redis
 * @throws EndpointNotFoundError when the viewer may not see it
 */
export async function getEndpointStats(
  db: Database,
  endpointId: number,
  viewer: Viewer,
  readCircuit: (endpointId: number) => Promise<CircuitState>,
): Promise<EndpointStats> {
  const endpoint = await findVisibleEndpoint(db, endpointId, viewer);
  if (!endpoint) throw new EndpointNotFoundError(endpointId);
  const [[row], circuit] = await Promise.all([
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
  ]);
  return {
    attempts_24h: row.attempts,
    success_rate_24h: row.attempts === 0 ? null : Math.round((row.successes / row.attempts) * 10_000) / 10_000,
    p50_ms: row.p50 === null ? null : Math.round(row.p50),
    p95_ms: row.p95 === null ? null : Math.round(row.p95),
    last_success_at: row.last_success_at && new Date(row.last_success_at).toISOString(),
    last_failure_at: row.last_failure_at && new Date(row.last_failure_at).toISOString(),
    circuit,
    disabled_reason: endpoint.disabledReason,
  };
}
