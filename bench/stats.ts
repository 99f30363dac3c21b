import { performance } from 'node:perf_hooks';
import type { Client } from 'pg';
import { createDatabase } from '../shared/db';
import { ensureDayPartitions } from '../shared/db/partitions';
import { RECORD_SUCCESSES } from '../shared/deliveries/record';
import { OPERATOR, getEndpointStats, getOverviewStats } from '../shared/operations';
import { foldStats } from '../shared/stats/fold';
import { createBenchDatabase, withClient } from './lib/bench-database';
import { logScanEndpoint, logScanOverview } from './lib/log-scan-stats';
import { Figure, formatNumber, formatSection, Section } from './lib/report';
import { Scope } from './lib/scope';
import { BenchSettings, loadBenchSettings } from './lib/settings';
import { median } from './lib/timing';

/** Endpoints the attempts are spread over (docs/design.md §14: reads with 100 endpoints). */
const ENDPOINTS = 100;
/** Attempts recorded per statement: the record statement's batch, `unnest` of 1,000 rows. */
const BATCH = 1_000;
/** Timed reads per figure, after `WARM` untimed ones. */
const READS = 20;
const WARM = 3;
/** The read ceiling at 1,000,000 attempts in the window, ms (docs/design.md §14). */
const CEILING_MS = 20;

/** The median of `READS` warm runs of `read`, ms. */
async function medianMs(read: () => Promise<unknown>): Promise<number> {
  for (let i = 0; i < WARM; i += 1) await read();
  const times: number[] = [];
  for (let i = 0; i < READS; i += 1) {
    const started = performance.now();
    await read();
    times.push(performance.now() - started);
  }
  return median(times);
}

/**
 * Records `count` attempts through the worker's batch record statement (RECORD_SUCCESSES, the
 * triggers keeping the counts with it), `BATCH` at a time, over the endpoints in turn: each a
 * delivery made `delivering` as a claim leaves it, then its 2xx attempt, durations log-uniform
 * from 5 ms to 2 s.
 */
async function seed(client: Client, endpoints: number[], from: number, count: number): Promise<void> {
  for (let done = 0; done < count; done += BATCH) {
    const size = Math.min(BATCH, count - done);
    const { rows } = await client.query<{ id: string; created_at: Date; endpoint_id: number }>(
      `INSERT INTO webhook_deliveries (id, created_at, endpoint_id, url, event, status, enqueued_at)
       SELECT id, webhook_id_time(id), ($2::int[])[1 + n % array_length($2::int[], 1)], 'https://example.com/hooks', 'post.created', 'delivering', now()
         FROM (SELECT n, webhook_new_id('msg_') AS id FROM generate_series($1::int, $1::int + $3::int - 1) AS n) AS made
       RETURNING id, created_at, endpoint_id`,
      [from + done, endpoints, size],
    );
    const keys = rows.map((row) => row.created_at.getTime());
    await client.query(RECORD_SUCCESSES.text, [
      rows.map((row) => row.id),
      rows.map(() => 1),
      rows.map(() => 200),
      rows.map((_, i) => Math.round(5 * 400 ** (((from + done + i) * 0.618034) % 1))),
      rows.map(() => '{"ok":true}'),
      rows.map((row) => row.endpoint_id),
      rows.map((row) => row.created_at),
      new Date(Math.min(...keys)),
      new Date(Math.max(...keys)),
      rows.map(() => 'https://example.com/hooks'),
      rows.map(() => 0),
    ]);
  }
}

/**
 * Count rows for every endpoint and minute (and ten minutes, and hour) of the last day, 20 duration buckets
 * each: what a day of traffic at every endpoint leaves, the most rows a read meets.
 */
async function fillDay(client: Client): Promise<void> {
  await client.query(
    `INSERT INTO webhook_stats (endpoint_id, span_minutes, start, succeeded, retried, failed, durations)
     SELECT e.id, s.span, t, 50, 3, 1, (SELECT string_agg((40 + b) || ':3', ' ') FROM generate_series(1, 20) AS b)
       FROM webhook_endpoints e
      CROSS JOIN (VALUES (1::smallint), (10::smallint), (60::smallint)) AS s(span)
      CROSS JOIN LATERAL generate_series(date_bin(s.span * interval '1 minute', now() - interval '1441 minutes', timestamptz 'epoch'), now(), s.span * interval '1 minute') AS t
     ON CONFLICT DO NOTHING`,
  );
  await client.query('VACUUM ANALYZE webhook_stats');
}

/**
 * docs/design.md §14: the stats reads from the counts at 10,000, 100,000 and 1,000,000 attempts in
 * the window (seeded through the record statement), 100 endpoints, each the median of 20 warm
 * reads, beside the same read as it was made before, scanning the attempt log.
 */
export async function runStatsBench(settings: BenchSettings): Promise<Section> {
  const scope = new Scope();
  try {
    const bench = await createBenchDatabase(scope, settings.databaseUrl);
    const db = createDatabase(bench.url, { poolMax: 4 });
    scope.add('stats database handle', () => db.close());
    await ensureDayPartitions(db.sequelize);
    const closed = async () => 'closed' as const;
    return await withClient(bench.url, async (client) => {
      const { rows } = await client.query<{ id: number }>(
        `INSERT INTO webhook_endpoints (url, secret) SELECT 'https://example.com/hooks/' || n, 'whsec_bench' FROM generate_series(1, $1::int) AS n RETURNING id`,
        [ENDPOINTS],
      );
      const endpoints = rows.map((row) => row.id);
      const figures: Figure[] = [];
      const notes: string[] = [];
      const counts: { size: number; overview: number; endpoint: number }[] = [];
      let seeded = 0;
      for (const size of settings.statsSizes) {
        const started = performance.now();
        await seed(client, endpoints, seeded, size - seeded);
        await foldStats(db.sequelize);
        notes.push(`Seeding to ${formatNumber(size)} attempts (${formatNumber(size - seeded)} more, batches of ${formatNumber(BATCH)}) and folding took ${((performance.now() - started) / 1000).toFixed(1)} s.`);
        seeded = size;
        await client.query('VACUUM ANALYZE');
        const overview = await medianMs(() => getOverviewStats(db, OPERATOR, '24h'));
        const endpoint = await medianMs(() => getEndpointStats(db, endpoints[0], OPERATOR, closed, '24h'));
        counts.push({ size, overview, endpoint });
        const below = size >= 1_000_000 ? CEILING_MS : undefined;
        figures.push(
          {
            name: `overview read (?series=24h), ${formatNumber(size)} attempts`,
            unit: 'ms',
            ours: overview,
            baseline: { name: 'log scan', value: await medianMs(() => logScanOverview(client, '24h')) },
            below,
          },
          {
            name: `one endpoint's read (?series=24h), ${formatNumber(size)} attempts`,
            unit: 'ms',
            ours: endpoint,
            baseline: { name: 'log scan', value: await medianMs(() => logScanEndpoint(client, endpoints[0], '24h')) },
            below,
          },
        );
      }
      await fillDay(client);
      const fullOverview = await medianMs(() => getOverviewStats(db, OPERATOR, '24h'));
      const fullEndpoint = await medianMs(() => getEndpointStats(db, endpoints[0], OPERATOR, closed, '24h'));
      figures.push(
        { name: `overview read (?series=24h), every minute of the day holding counts`, unit: 'ms', ours: fullOverview, below: CEILING_MS },
        { name: `one endpoint's read (?series=24h), every minute of the day holding counts`, unit: 'ms', ours: fullEndpoint, below: CEILING_MS },
      );
      const first = counts[0];
      const last = counts[counts.length - 1];
      notes.push(
        `Counts read at ${formatNumber(last.size)} over ${formatNumber(first.size)} attempts: overview ${(last.overview / first.overview).toFixed(2)}x, one endpoint ${(last.endpoint / first.endpoint).toFixed(2)}x (the goal: at most 1.5x).`,
        `The reads are the api's own functions (getOverviewStats, getEndpointStats) in process, operator view, each the median of ${READS} after ${WARM} warm ones; the baseline runs the statements the reads made before the counts, on the same database.`,
        `The record statement writes each attempt at the database's now(), so the seeded attempts fill only the minutes of the seeding: the last two figures add count rows for every endpoint and every minute, ten minutes and hour of the last day (20 duration buckets each), the most rows a read can meet.`,
      );
      return { title: `Stats reads (${ENDPOINTS} endpoints, attempts recorded through the batch record statement)`, figures, notes };
    });
  } finally {
    await scope.close();
  }
}

if (require.main === module) {
  runStatsBench(loadBenchSettings()).then(
    (section) => process.stdout.write(formatSection(section)),
    (error: unknown) => {
      process.stderr.write(`${String(error)}\n`);
      process.exitCode = 1;
    },
  );
}
