import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { createDatabase } from '../shared/db';
import { DAY_MS } from '../shared/db/partitions';
import { createMigrator } from '../shared/db/migrate';
import { insertEventDeliveryJobs } from '../shared/deliveries/fan-out';
import { createRetention } from '../services/webhook-worker/src/retention';
import { BenchDatabase, createBenchDatabase, withClient } from './lib/bench-database';
import { formatNumber, formatSection, Section } from './lib/report';
import { Scope } from './lib/scope';
import { BenchSettings, loadBenchSettings } from './lib/settings';

/** The migration that made the day partitions (docs/design.md §3.4). */
const DAY_PARTITIONS_MIGRATION = '20261126000100-day-partitions.js';
/** The migration before it: the layout the day partitions' migration starts from. */
const BEFORE_DAY_PARTITIONS = '20261125000200-endpoint-public-key.js';
/** How long the batched delete of the retention figure may run before it is stopped, ms. */
const BATCHED_DELETE_CAP_MS = 120_000;
const RETENTION_DAYS = 30;

/**
 * docs/design.md §3.2, measured: the bytes a delivery costs with each event's body stored
 * once, against a body in every delivery (the layout before); retention by dropping day
 * partitions against the batched deletes it replaced; and the migration to the day partitions
 * on a database of BENCH_MIGRATION_DELIVERIES deliveries, up and down.
 */
export async function runStorageBench(settings: BenchSettings): Promise<Section> {
  const scope = new Scope();
  try {
    const fanOut = await Promise.all([1, 20].map(async (endpoints) => bytesPerDelivery(await createBenchDatabase(scope, settings.databaseUrl), endpoints)));
    const retention = await retentionRun(await createBenchDatabase(scope, settings.databaseUrl), settings.retentionDayDeliveries);
    const migration = await migrationRun(scope, settings, settings.migrationDeliveries);
    return {
      title: `Storage (docs/design.md §3: events stored once, day partitions)`,
      figures: [
        ...fanOut.map((run) => ({
          name: `bytes per delivery, an event fanned out to ${run.endpoints} endpoint${run.endpoints === 1 ? '' : 's'}`,
          unit: 'B',
          ours: run.ours,
          oursDetail: `${formatNumber(run.deliveries)} deliveries of ${formatNumber(run.events)} post events, tables and indexes`,
          baseline: { name: 'the same deliveries with the body in each (before revision 3)', value: run.baseline },
        })),
        {
          name: `retention of ${RETENTION_DAYS} days x ${formatNumber(settings.retentionDayDeliveries)} deliveries`,
          unit: 's',
          ours: retention.dropSeconds,
          oursDetail: `${formatNumber(retention.deliveries)} deliveries with their events and attempts dropped`,
          baseline: { name: `batched deletes of 1,000 (before)${retention.deleteFinished ? '' : `, stopped after ${BATCHED_DELETE_CAP_MS / 1000} s`}`, value: retention.deleteSeconds },
          problem: retention.dropped === retention.deliveries ? undefined : `${formatNumber(retention.dropped)} of ${formatNumber(retention.deliveries)} dropped`,
        },
        {
          name: 'table bloat after that retention',
          unit: 'MB',
          ours: retention.bytesAfterDrop / 1e6,
          oursDetail: 'the days are gone with their rows; what is left is the empty partitions of today and the days ahead, and the legacy partition',
          baseline: {
            name: `batched deletes: ${formatNumber(retention.deletedRows)} of ${formatNumber(retention.deliveries)} rows deleted, the space kept until VACUUM FULL`,
            value: retention.bytesAfterDelete / 1e6,
          },
        },
        {
          name: `migration to day partitions on ${formatNumber(settings.migrationDeliveries)} deliveries, up`,
          unit: 's',
          ours: migration.upSeconds,
          below: 60,
          oursDetail: `with ${formatNumber(settings.migrationDeliveries)} events and attempts; every row kept (counted after)`,
          problem: migration.keptUp ? undefined : 'rows were lost',
        },
        {
          name: `the same migration, down`,
          unit: 's',
          ours: migration.downSeconds,
          below: 60,
          problem: migration.keptDown ? undefined : 'rows were lost',
        },
      ],
      notes: [
        'Bytes per delivery: the events are written by the outbox\'s own fan-out statement; the baseline copies each delivery into a plain table of the same columns and indexes, with the event\'s body in it and no event row. Both count table, TOAST and index bytes.',
        `Retention: ${RETENTION_DAYS} days older than WEBHOOK_RETENTION_DAYS, each with its deliveries (succeeded, one attempt, one event each), pruned by the worker's own retention; the baseline is the delete statement retention ran before the day partitions, in batches of 1,000, on plain tables holding the same rows.`,
      ],
    };
  } finally {
    await scope.close();
  }
}

/** Sum of table, TOAST and index bytes of the three tables, all their partitions. */
const TABLE_BYTES = `SELECT coalesce(sum(pg_total_relation_size(relid)), 0)::bigint AS bytes
  FROM (SELECT relid FROM pg_partition_tree('webhook_events') UNION ALL SELECT relid FROM pg_partition_tree('webhook_deliveries')
        UNION ALL SELECT relid FROM pg_partition_tree('webhook_attempts')) AS tree`;

async function bytesPerDelivery(db: BenchDatabase, endpoints: number) {
  const events = Math.ceil(10_000 / endpoints);
  await withClient(db.url, async (client) => {
    for (let i = 0; i < endpoints; i += 1) {
      await client.query('INSERT INTO webhook_endpoints (url, secret) VALUES ($1, $2)', [`https://example.com/hooks/${i}`, `whsec_${randomBytes(32).toString('base64')}`]);
    }
  });
  const before = await withClient(db.url, async (client) => Number((await client.query(TABLE_BYTES)).rows[0].bytes));
  const database = createDatabase(db.url, { poolMax: 2 });
  try {
    for (let done = 0; done < events; done += 100) {
      await database.sequelize.transaction(async (transaction) => {
        for (let i = done; i < Math.min(events, done + 100); i += 1) {
          await insertEventDeliveryJobs(database.sequelize, transaction, { kind: 'post', event: 'post.created', data: postData(i), ownerUserId: 1 });
        }
      });
    }
  } finally {
    await database.close();
  }
  return withClient(db.url, async (client) => {
    const ours = Number((await client.query(TABLE_BYTES)).rows[0].bytes) - before;
    const deliveries = Number((await client.query('SELECT count(*)::int AS n FROM webhook_deliveries')).rows[0].n);
    await client.query(`CREATE TABLE body_in_each (LIKE webhook_deliveries INCLUDING ALL)`);
    await client.query(
      `INSERT INTO body_in_each
       SELECT (jsonb_populate_record(NULL::body_in_each, to_jsonb(d) || jsonb_build_object('body', e.body, 'event_id', NULL))).*
         FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id`,
    );
    const baseline = Number((await client.query(`SELECT pg_total_relation_size('body_in_each')::bigint AS bytes`)).rows[0].bytes);
    return { endpoints, events, deliveries, ours: ours / deliveries, baseline: baseline / deliveries };
  });
}

/** A post as the api puts it in an event: some 300 bytes of content, like a short post. */
function postData(i: number): object {
  return {
    pid: 100_000 + i,
    uuid: '0b6f3f4e-6c5a-4d0e-9a38-6f0f3c1d2e4b',
    user_id: 1,
    title: `Storage post ${i}`,
    content: 'Lorem ipsum dolor sit amet, consectetur adipiscing elit. '.repeat(5).trim(),
    image: null,
    created_at: '2026-11-25T10:00:00.000Z',
    updated_at: '2026-11-25T10:00:00.000Z',
  };
}

/**
 * Writes `perDay` succeeded deliveries (each with its event and one attempt) on each of the
 * RETENTION_DAYS days before the window, into their day partitions and, for the baseline,
 * into plain tables; then times the worker's retention against the old batched delete.
 */
async function retentionRun(db: BenchDatabase, perDay: number) {
  const firstDay = Math.floor((Date.now() - 2 * RETENTION_DAYS * DAY_MS) / DAY_MS) * DAY_MS;
  await withClient(db.url, async (client) => {
    await client.query(`SELECT webhook_ensure_day_partitions(($1::timestamptz AT TIME ZONE 'UTC')::date, ($2::timestamptz AT TIME ZONE 'UTC')::date)`, [
      new Date(firstDay),
      new Date(firstDay + (RETENTION_DAYS - 1) * DAY_MS),
    ]);
    for (let day = 0; day < RETENTION_DAYS; day += 1) await fillDay(client, new Date(firstDay + day * DAY_MS), perDay);
    for (const table of ['webhook_events', 'webhook_deliveries', 'webhook_attempts']) {
      await client.query(`CREATE TABLE plain_${table.slice(8)} (LIKE ${table} INCLUDING ALL)`);
      await client.query(`INSERT INTO plain_${table.slice(8)} SELECT * FROM ${table} WHERE ${table === 'webhook_attempts' ? 'delivery_created_at' : 'created_at'} < now() - interval '${RETENTION_DAYS} days'`);
    }
    await client.query('VACUUM ANALYZE');
  });
  const deliveries = RETENTION_DAYS * perDay;

  const database = createDatabase(db.url, { poolMax: 2 });
  let dropSeconds: number;
  let dropped: number;
  try {
    const retention = createRetention({
      config: { webhookRetentionDays: RETENTION_DAYS, redisPrefix: 'unused', redisUrl: 'redis://127.0.0.1:1', redisClusterNodes: [], webhookQueuePartitions: 1, maintenanceIntervalMs: 60_000 },
      sequelize: database.sequelize,
      logger: pino({ level: 'silent' }),
      schedule: false,
    });
    const started = performance.now();
    dropped = (await retention.prune()).deliveries;
    dropSeconds = (performance.now() - started) / 1000;
    await retention.close();
  } finally {
    await database.close();
  }
  const bytesAfterDrop = await withClient(db.url, async (client) => Number((await client.query(TABLE_BYTES)).rows[0].bytes));

  // The statement retention ran before the day partitions (attempts went by ON DELETE CASCADE; here explicitly).
  const deleted = await withClient(db.url, async (client) => {
    const started = performance.now();
    let rows = 0;
    for (;;) {
      const result = await client.query(
        `WITH doomed AS (
           SELECT id FROM plain_deliveries WHERE status = 'succeeded' AND created_at < now() - $1 * interval '1 day'
            ORDER BY created_at LIMIT 1000 FOR UPDATE SKIP LOCKED
         ), attempts AS (DELETE FROM plain_attempts a USING doomed WHERE a.delivery_id = doomed.id),
         events AS (DELETE FROM plain_events e USING plain_deliveries d, doomed WHERE d.id = doomed.id AND e.id = d.event_id),
         gone AS (DELETE FROM plain_deliveries d USING doomed WHERE d.id = doomed.id RETURNING 1)
         SELECT count(*)::int AS n FROM gone`,
        [RETENTION_DAYS],
      );
      rows += Number(result.rows[0].n);
      const elapsed = performance.now() - started;
      if (Number(result.rows[0].n) < 1000 || elapsed > BATCHED_DELETE_CAP_MS) {
        const bytes = Number(
          (await client.query(`SELECT (pg_total_relation_size('plain_deliveries') + pg_total_relation_size('plain_attempts') + pg_total_relation_size('plain_events'))::bigint AS b`)).rows[0].b,
        );
        return { rows, seconds: elapsed / 1000, finished: Number(result.rows[0].n) < 1000, bytes };
      }
    }
  });
  return {
    deliveries,
    dropped,
    dropSeconds,
    bytesAfterDrop,
    deleteSeconds: deleted.seconds,
    deleteFinished: deleted.finished,
    deletedRows: deleted.rows,
    bytesAfterDelete: deleted.bytes,
  };
}

/** `count` succeeded deliveries made on `day`, each with its event and one attempt, ids made at their time. */
async function fillDay(client: import('pg').Client, day: Date, count: number): Promise<void> {
  await client.query(
    `WITH made AS (
       SELECT n, $1::timestamptz + (n * (86399000.0 / $2)) * interval '1 millisecond' AS at FROM generate_series(0, $2 - 1) AS n
     ), ids AS (
       SELECT n, webhook_new_id('evt_', at) AS event_id, webhook_new_id('msg_', at) AS id FROM made
     ), events AS (
       INSERT INTO webhook_events (id, created_at, kind, event, body)
       SELECT event_id, webhook_id_time(event_id), 'post', 'post.created', repeat('x', 400) FROM ids
     ), deliveries AS (
       INSERT INTO webhook_deliveries (id, created_at, event_id, endpoint_id, url, event, status, attempts, enqueued_at, delivered_at)
       SELECT id, webhook_id_time(id), event_id, NULL, 'https://example.com/hooks', 'post.created', 'succeeded', 1, webhook_id_time(id), webhook_id_time(id) FROM ids
     )
     INSERT INTO webhook_attempts (delivery_id, delivery_created_at, attempt_number, status_code, duration_ms, response_body, attempted_at)
     SELECT id, webhook_id_time(id), 1, 200, 20, '{"ok":true}', webhook_id_time(id) FROM ids`,
    [day, count],
  );
}

/**
 * A database migrated up to the layout before the day partitions, filled with `deliveries`
 * deliveries (each with its event and one attempt), then migrated up to them and down again.
 */
async function migrationRun(scope: Scope, settings: BenchSettings, deliveries: number) {
  const db = await createBenchDatabase(scope, settings.databaseUrl, { migrateTo: BEFORE_DAY_PARTITIONS });
  await withClient(db.url, async (client) => {
    for (let done = 0; done < deliveries; done += 100_000) {
      const count = Math.min(100_000, deliveries - done);
      await client.query(
        `WITH ids AS (
           SELECT n, webhook_new_id('evt_') AS event_id, webhook_new_id('msg_') AS id FROM generate_series(1, $1) AS n
         ), events AS (
           INSERT INTO webhook_events (id, kind, event, body) SELECT event_id, 'post', 'post.created', repeat('x', 400) FROM ids
         ), deliveries AS (
           INSERT INTO webhook_deliveries (id, event_id, url, event, status, attempts, enqueued_at, delivered_at)
           SELECT id, event_id, 'https://example.com/hooks', 'post.created', 'succeeded', 1, now(), now() FROM ids
         )
         INSERT INTO webhook_attempts (delivery_id, attempt_number, status_code, duration_ms, response_body) SELECT id, 1, 200, 20, '{"ok":true}' FROM ids`,
        [count],
      );
    }
    await client.query('VACUUM ANALYZE');
  });
  const count = () => withClient(db.url, async (client) => Number((await client.query('SELECT (SELECT count(*) FROM webhook_deliveries) + (SELECT count(*) FROM webhook_events) + (SELECT count(*) FROM webhook_attempts) AS n')).rows[0].n));
  const database = createDatabase(db.url, { poolMax: 1 });
  try {
    const migrator = createMigrator(database.sequelize);
    let started = performance.now();
    await migrator.up({ to: DAY_PARTITIONS_MIGRATION });
    const upSeconds = (performance.now() - started) / 1000;
    const keptUp = (await count()) === 3 * deliveries;
    started = performance.now();
    await migrator.down({ to: DAY_PARTITIONS_MIGRATION });
    const downSeconds = (performance.now() - started) / 1000;
    const keptDown = (await count()) === 3 * deliveries;
    return { upSeconds, downSeconds, keptUp, keptDown };
  } finally {
    await database.close();
  }
}

if (require.main === module) {
  runStorageBench(loadBenchSettings()).then(
    (section) => process.stdout.write(formatSection(section)),
    (error: unknown) => {
      process.stderr.write(`${String(error)}\n`);
      process.exitCode = 1;
    },
  );
}
