import pino from 'pino';
import { QueryTypes } from 'sequelize';
import { createRetention } from '../../services/webhook-worker/src/retention';
import { claimStatement } from '../../shared/deliveries/claim';
import { createDatabase, Database } from '../../shared/db';
import { createMigrator } from '../../shared/db/migrate';
import { withRawConnection } from '../../shared/db/raw-query';
import { getDeliveryDetails } from '../../shared/operations/delivery-log';
import { OPERATOR } from '../../shared/operations/viewer';
import { insertSingleDelivery } from '../../shared/deliveries/events';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { ensureDays, idAt } from '../support/partitions';
import { relationNodes } from '../support/plans';

const DAY_MIGRATION = '20261126000100-day-partitions.js';
const DAY_MS = 86_400_000;

/** docs/design.md §3.4: the three tables partitioned by UTC day. */
describe('day partitions', () => {
  let env: TestEnvironment;
  let db: Database;

  beforeAll(async () => {
    env = await createTestEnvironment();
    db = createDatabase(env.config.databaseUrl, { poolMax: 2 });
  });

  afterAll(async () => {
    await db.close();
    await env.cleanup();
  });

  const query = <R extends object>(sql: string, bind: unknown[] = []) => db.sequelize.query<R>(sql, { bind, type: QueryTypes.SELECT });

  /** Every row of the three tables as PostgreSQL prints it, attempts without the column the migration adds. */
  /** Every row's bytes; an attempt's `url` is a later migration's column, null on rows from before it. */
  async function snapshot(): Promise<string[]> {
    const rows = await query<{ row: string }>(`
      SELECT 'e ' || row_to_json(e)::text AS row FROM webhook_events e
      UNION ALL SELECT 'd ' || row_to_json(d)::text FROM webhook_deliveries d
      UNION ALL SELECT 'a ' || (to_jsonb(a) - 'delivery_created_at' - 'url')::text FROM webhook_attempts a`);
    return rows.map((row) => row.row).sort();
  }

  /** The partitions a statement's plan reads, from `EXPLAIN (FORMAT JSON)` of it with its values. */
  async function relationsOf(sql: string, bind: unknown[]): Promise<string[]> {
    const [row] = await query<{ 'QUERY PLAN': unknown }>(`EXPLAIN (FORMAT JSON) ${sql}`, bind);
    const found = new Set(relationNodes(row['QUERY PLAN']).map((node) => node.relation));
    // Partitions only: an UPDATE also names its (partitioned) target table.
    return [...found].filter((name) => /^webhook_(events|deliveries|attempts)_(p\d{8}|legacy)$/.test(name)).sort();
  }

  /** The statements a call runs through Sequelize, with their values. */
  async function statementsOf(call: () => Promise<unknown>): Promise<{ sql: string; bind: unknown[] }[]> {
    const seen: { sql: string; bind: unknown[] }[] = [];
    // Sequelize hands every statement it runs, with its bind values, to `options.logging`.
    const options = (db.sequelize as unknown as { options: { logging: unknown } }).options;
    const previous = options.logging;
    options.logging = (sql: string, given?: unknown) => {
      seen.push({ sql: sql.replace(/^Executing \([^)]*\): /, ''), bind: ((given as { bind?: unknown[] })?.bind ?? []) as unknown[] });
    };
    try {
      await call();
    } finally {
      options.logging = previous;
    }
    return seen;
  }

  const stamp = (at: Date) => at.toISOString().slice(0, 10).replace(/-/g, '');

  async function sendAt(at: Date): Promise<string> {
    const id = idAt('msg_', at);
    await insertSingleDelivery(db.sequelize, {
      id,
      kind: 'send',
      event: 'post.created',
      body: `{"_data":{"at":"${at.toISOString()}"}}`,
      endpointId: null,
      userId: null,
      url: 'http://127.0.0.1:9/x',
      method: 'POST',
      headers: {},
      secret: null,
      algo: 'sha256',
      signatureHeader: 'X-Signature',
      traceparent: null,
    });
    return id;
  }

  it('When rows are written at a day boundary, then each lands in its own day with its event, at its id’s millisecond', async () => {
    const midnight = new Date(Math.ceil(Date.now() / DAY_MS) * DAY_MS);
    const before = await sendAt(new Date(midnight.getTime() - 1));
    const after = await sendAt(midnight);

    const rows = await query<{ id: string; partition: string; event_partition: string; exact: boolean }>(
      `SELECT d.id, d.tableoid::regclass::text AS partition, e.tableoid::regclass::text AS event_partition,
              d.created_at = webhook_id_time(d.id) AND e.created_at = d.created_at AS exact
         FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id WHERE d.id IN ($1, $2) ORDER BY d.created_at`,
      [before, after],
    );
    const dayBefore = stamp(new Date(midnight.getTime() - 1));
    expect(rows).toEqual([
      { id: before, partition: `webhook_deliveries_p${dayBefore}`, event_partition: `webhook_events_p${dayBefore}`, exact: true },
      { id: after, partition: `webhook_deliveries_p${stamp(midnight)}`, event_partition: `webhook_events_p${stamp(midnight)}`, exact: true },
    ]);
    const [made] = await query<{ exact: boolean }>(
      `SELECT webhook_id_time(webhook_new_id('msg_', $1::timestamptz)) = $1::timestamptz AS exact`,
      [new Date(midnight.getTime() - 1)],
    );
    expect(made.exact).toBe(true);
  });

  it('When the worker claims a delivery and the operations API reads one, then each plan reads only that day’s partitions, among 40 days of them', async () => {
    const today = new Date();
    await ensureDays(db.sequelize, ...Array.from({ length: 32 }, (_, n) => new Date(today.getTime() - (n + 1) * DAY_MS)));
    const id = await sendAt(today);
    const day = stamp(today);

    const claim = claimStatement([{ deliveryId: id, oneShot: false }]);
    expect(await relationsOf(claim.text, claim.values ?? [])).toEqual([`webhook_deliveries_p${day}`, `webhook_events_p${day}`]);

    const statements = await statementsOf(async () => expect(await getDeliveryDetails(db, id, OPERATOR)).toMatchObject({ id }));
    expect(statements).toHaveLength(2);
    expect(await relationsOf(statements[0].sql, statements[0].bind)).toEqual([`webhook_deliveries_p${day}`]);
    expect(await relationsOf(statements[1].sql, statements[1].bind)).toEqual([`webhook_attempts_p${day}`]);
  });

  it('When the worker claims deliveries again and again on one connection, then PostgreSQL planned its claim once, not at every claim', async () => {
    const today = new Date();
    await ensureDays(db.sequelize, ...Array.from({ length: 32 }, (_, n) => new Date(today.getTime() - (n + 1) * DAY_MS)));
    const ids = await Promise.all(Array.from({ length: 8 }, () => sendAt(today)));

    const plans = await withRawConnection(db.sequelize, async (connection) => {
      for (const id of ids) expect(await connection.query(claimStatement([{ deliveryId: id, oneShot: false }]))).toHaveLength(1);
      return connection.query<{ generic_plans: string; custom_plans: string }>({
        text: 'SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = $1',
        values: [claimStatement([]).name],
      });
    });
    // A custom plan per claim cost more than the claim itself (docs/design.md §3.4's partitions by day).
    expect(plans).toEqual([{ generic_plans: '8', custom_plans: '0' }]);
  });

  it('When undone and redone over rows with ids of both kinds, then every row keeps its bytes, old ids are found in the legacy partition only, and rows written since survive the undo', async () => {
    const migrator = createMigrator(db.sequelize);
    await migrator.down({ to: DAY_MIGRATION });
    // Rows as they were before: a random id, and a time-ordered one whose created_at is its insert's now().
    const timeOrdered = idAt('msg_', new Date(Date.now() - 60_000));
    await db.sequelize.query(`
      INSERT INTO webhook_events (id, kind, event, body) VALUES ('evt_legacy', 'post', 'post.created', '{"legacy":"é"}');
      INSERT INTO webhook_deliveries (id, event_id, url, event, status) VALUES
        ('msg_legacy', 'evt_legacy', 'http://127.0.0.1:9/x', 'post.created', 'failed'),
        ('${timeOrdered}', 'evt_legacy', 'http://127.0.0.1:9/x', 'post.created', 'succeeded');
      INSERT INTO webhook_attempts (delivery_id, attempt_number, status_code, duration_ms, response_body) VALUES
        ('msg_legacy', 1, 500, 12, 'nope'), ('${timeOrdered}', 1, 200, 3, 'ok ü');`);
    const before = await snapshot();

    await migrator.up();

    expect(await snapshot()).toEqual(before);
    for (const id of ['msg_legacy', timeOrdered]) {
      expect(await getDeliveryDetails(db, id, OPERATOR)).toMatchObject({ id, attempts: [{ number: 1 }] });
      const claim = claimStatement([{ deliveryId: id, oneShot: true }]);
      expect(await relationsOf(claim.text, claim.values ?? [])).toEqual(['webhook_deliveries_legacy', 'webhook_events_legacy']);
    }
    const fresh = await sendAt(new Date(Date.now() + 2 * DAY_MS));
    await db.sequelize.query(
      `INSERT INTO webhook_attempts (delivery_id, delivery_created_at, attempt_number, status_code, duration_ms) VALUES ($1, webhook_id_time($1), 1, 204, 4)`,
      { bind: [fresh] },
    );
    const withFresh = await snapshot();
    expect(withFresh.length).toBe(before.length + 3);

    await migrator.down({ to: DAY_MIGRATION });
    expect(await snapshot()).toEqual(withFresh);
    const [kind] = await query<{ relkind: string }>(`SELECT relkind FROM pg_class WHERE relname = 'webhook_deliveries'`);
    expect(kind.relkind).toBe('r');

    await migrator.up();
    expect(await snapshot()).toEqual(withFresh);
  });

  it('When the legacy partition holds rows past the window, then the prune deletes its succeeded deliveries with their attempts and keeps the failed ones', async () => {
    // After the previous test's migration the legacy partition runs to after today.
    await db.sequelize.query(`
      INSERT INTO webhook_deliveries (id, created_at, url, event, body, status) VALUES
        ('msg_legacy_old_ok', now() - interval '40 days', 'http://127.0.0.1:9/x', 'post.created', '{}', 'succeeded'),
        ('msg_legacy_old_failed', now() - interval '40 days', 'http://127.0.0.1:9/x', 'post.created', '{}', 'failed');
      INSERT INTO webhook_attempts (delivery_id, delivery_created_at, attempt_number, status_code, duration_ms) VALUES
        ('msg_legacy_old_ok', '-infinity', 1, 200, 3), ('msg_legacy_old_failed', '-infinity', 1, 500, 3);`);
    const retention = createRetention({ config: env.config, sequelize: db.sequelize, logger: pino({ level: 'silent' }), schedule: false });

    const result = await retention.prune();
    await retention.close();

    expect(result).toMatchObject({ days: 0, deliveries: 1 });
    const left = await query<{ id: string; partition: string }>(
      `SELECT delivery_id AS id, tableoid::regclass::text AS partition FROM webhook_attempts WHERE delivery_id LIKE 'msg_legacy_old%'`,
    );
    expect(left).toEqual([{ id: 'msg_legacy_old_failed', partition: 'webhook_attempts_legacy' }]);
    expect((await query<{ id: string }>(`SELECT id FROM webhook_deliveries WHERE id LIKE 'msg_legacy_old%'`)).map((row) => row.id)).toEqual([
      'msg_legacy_old_failed',
    ]);
  });
});
