import { QueryTypes, type Sequelize } from 'sequelize';
import { foldStats } from '../../shared/stats/fold';

/** One endpoint's attempts of one UTC minute by outcome, and how many durations its histogram holds. */
export interface MinuteCounts {
  endpoint_id: number;
  minute: string;
  succeeded: number;
  retried: number;
  failed: number;
  durations: number;
}

/**
 * The attempts per endpoint and minute as the attempt log says by the outcome rules
 * (docs/api.md, stats): what the counts must equal. Ad-hoc sends (no endpoint) aside.
 */
export async function countsFromLog(sequelize: Sequelize): Promise<MinuteCounts[]> {
  return sequelize.query<MinuteCounts>(
    `WITH a AS (
       SELECT d.endpoint_id, date_bin('1 minute', a.attempted_at, timestamptz 'epoch') AS minute,
              CASE WHEN a.status_code BETWEEN 200 AND 299 THEN 'succeeded'
                   WHEN d.status IN ('pending', 'delivering')
                     OR lead(a.attempt_number) OVER (PARTITION BY a.delivery_id ORDER BY a.attempt_number) IS NOT NULL THEN 'retried'
                   ELSE 'failed' END AS outcome
         FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id
        WHERE d.endpoint_id IS NOT NULL
     )
     SELECT endpoint_id, to_char(minute AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI') AS minute,
            (count(*) FILTER (WHERE outcome = 'succeeded'))::int AS succeeded,
            (count(*) FILTER (WHERE outcome = 'retried'))::int AS retried,
            (count(*) FILTER (WHERE outcome = 'failed'))::int AS failed,
            count(*)::int AS durations
       FROM a GROUP BY endpoint_id, minute ORDER BY endpoint_id, minute`,
    { type: QueryTypes.SELECT },
  );
}

/**
 * The counts kept, per endpoint and minute, after folding every delta (rows of all zeros
 * left out: a minute whose only attempt moved elsewhere).
 *
 * @param span - 1: the minute rows; 60: checks the hour rows instead, as the sums of their minutes
 */
export async function countsKept(sequelize: Sequelize, span: 1 | 60 = 1): Promise<MinuteCounts[]> {
  await foldStats(sequelize);
  return sequelize.query<MinuteCounts>(
    `SELECT endpoint_id, to_char(start AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI') AS minute, succeeded, retried, failed,
            (SELECT COALESCE(sum(split_part(e, ':', 2)::int), 0) FROM unnest(string_to_array(durations, ' ')) AS e WHERE e <> '')::int AS durations
       FROM webhook_stats WHERE span_minutes = $1 AND (succeeded, retried, failed) <> (0, 0, 0)
      ORDER BY endpoint_id, start`,
    { bind: [span], type: QueryTypes.SELECT },
  );
}

/** {@link countsFromLog} summed per endpoint and UTC hour, in the same shape (`minute` the hour's first). */
export function perHour(counts: MinuteCounts[]): MinuteCounts[] {
  const hours = new Map<string, MinuteCounts>();
  for (const row of counts) {
    const minute = `${row.minute.slice(0, 14)}00`;
    const key = `${row.endpoint_id} ${minute}`;
    const hour = hours.get(key) ?? { endpoint_id: row.endpoint_id, minute, succeeded: 0, retried: 0, failed: 0, durations: 0 };
    hour.succeeded += row.succeeded;
    hour.retried += row.retried;
    hour.failed += row.failed;
    hour.durations += row.durations;
    hours.set(key, hour);
  }
  return [...hours.values()];
}
