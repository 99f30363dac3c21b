import { createDatabase, Database } from '../../shared/db';
import { createMigrator } from '../../shared/db/migrate';
import { withRawConnection } from '../../shared/db/raw-query';
import { TestEnvironment, createTestEnvironment } from '../support/environment';

/**
 * The schema's functions that statements call (ids, partition keys): PostgreSQL parses and
 * plans an SQL-language function's body again in every statement that calls it, unless the
 * planner inlines it; a PL/pgSQL function is planned once per connection
 * (migrations/20261130000100-id-functions-planned-once.js).
 */
const MIGRATION = '20261130000100-id-functions-planned-once.js';

describe('the schema’s SQL functions', () => {
  let env: TestEnvironment;
  let db: Database;

  beforeAll(async () => {
    env = await createTestEnvironment();
    db = createDatabase(env.config.databaseUrl, { poolMax: 1 });
  });

  afterAll(async () => {
    await db.close();
    await env.cleanup();
  });

  /** The SQL-language functions of the schema that a generic plan calls rather than inlines, with their plans. */
  async function notInlined(): Promise<string[]> {
    return withRawConnection(db.sequelize, async (connection) => {
      const functions = await connection.query<{ name: string; types: string[] }>({
        text: `SELECT p.proname AS name, array(SELECT format_type(t, NULL) FROM unnest(p.proargtypes) AS t) AS types
                 FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang JOIN pg_namespace n ON n.oid = p.pronamespace
                WHERE n.nspname = 'public' AND l.lanname = 'sql' ORDER BY 1`,
      });
      await connection.query({ text: 'SET plan_cache_mode = force_generic_plan' });
      const calls: string[] = [];
      for (const [index, { name, types }] of functions.entries()) {
        const args = types.map((type, n) => `$${n + 1}::${type}`).join(', ');
        await connection.query({ text: `PREPARE inline_check_${index}${types.length > 0 ? `(${types.join(', ')})` : ''} AS SELECT ${name}(${args})` });
        const plan = await connection.query<{ 'QUERY PLAN': string }>({
          text: `EXPLAIN (VERBOSE) EXECUTE inline_check_${index}${types.length > 0 ? `(${types.map(() => 'NULL').join(', ')})` : ''}`,
        });
        const output = plan.map((line) => line['QUERY PLAN']).join('\n');
        if (output.includes(`${name}(`)) calls.push(`${name}: ${output}`);
        await connection.query({ text: `DEALLOCATE inline_check_${index}` });
      }
      await connection.query({ text: 'RESET plan_cache_mode' });
      return calls;
    });
  }

  /** Ids drawn now and at a given time, and whether the latter's time is the one asked for. */
  async function drawIds(): Promise<{ now: string; at: string; exact: boolean }> {
    const [row] = await withRawConnection(db.sequelize, (connection) =>
      connection.query<{ now: string; at: string; exact: boolean }>({
        text: `SELECT webhook_new_id('msg_') AS now, webhook_new_id('evt_', $1::timestamptz) AS at,
                      webhook_id_time(webhook_new_id('evt_', $1::timestamptz)) = $1::timestamptz AS exact`,
        values: ['2026-11-30T23:59:59.999Z'],
      }),
    );
    return row;
  }

  it('When a prepared statement calls any SQL-language function of the schema, then its generic plan holds the function inlined, not a call', async () => {
    expect(await notInlined()).toEqual([]);
  });

  it('When webhook_new_id draws ids, then they keep the format of ids made in Node and the time asked for', async () => {
    const row = await drawIds();
    expect(row.now).toMatch(/^msg_[A-Za-z0-9_-]{22}$/);
    expect(row.at).toMatch(/^evt_[A-Za-z0-9_-]{22}$/);
    const bytes = Buffer.from(row.at.slice(4), 'base64url');
    // RFC 9562 §5.7: version 7, variant 10.
    expect([bytes[6] >> 4, bytes[8] >> 6]).toEqual([7, 2]);
    expect(row.exact).toBe(true);
  });

  it('When the migration is undone and redone, then the SQL bodies come back, drawing ids of the same format, and then the ones planned once', async () => {
    const migrator = createMigrator(db.sequelize);
    await migrator.down({ to: MIGRATION });
    expect((await notInlined()).map((call) => call.split(':')[0])).toEqual(['webhook_key_hi', 'webhook_new_id', 'webhook_new_id']);
    expect(await drawIds()).toMatchObject({ now: expect.stringMatching(/^msg_[A-Za-z0-9_-]{22}$/), exact: true });

    await migrator.up();
    expect(await notInlined()).toEqual([]);
    expect(await drawIds()).toMatchObject({ now: expect.stringMatching(/^msg_[A-Za-z0-9_-]{22}$/), exact: true });
  });
});
