import { QueryTypes } from 'sequelize';
import { createDatabase, Database } from '../../shared/db';
import { createMigrator } from '../../shared/db/migrate';
import { insertDelivery } from '../api/support/operations';
import { createTestEnvironment, TestEnvironment } from '../support/environment';
import { countsFromLog, countsKept } from '../support/stats-counts';

const STATS_MIGRATION = '20261202000100-stats-counts.js';
const MINUTE = 60_000;

/** docs/design.md §3, §14: the upgrade folds the attempts already logged into the counts, and is reversible. */
describe('the stats counts migration', () => {
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

  const statsTables = async () =>
    (
      await db.sequelize.query<{ name: string }>(`SELECT tablename AS name FROM pg_tables WHERE tablename LIKE 'webhook_stats%' ORDER BY tablename`, {
        type: QueryTypes.SELECT,
      })
    ).map((row) => row.name);

  /** A delivery with its attempts as the worker logged them before the upgrade: `[status code or null, minutes ago]`. */
  async function logged(endpointId: number, status: string, attempts: [number | null, number][]): Promise<string> {
    const createdAt = new Date(Date.now() - attempts[0][1] * MINUTE - 1_000);
    const id = await insertDelivery(db, { endpointId, status, createdAt });
    for (const [index, [code, ago]] of attempts.entries()) {
      await db.sequelize.query(
        `INSERT INTO webhook_attempts (delivery_id, delivery_created_at, attempt_number, status_code, duration_ms, attempted_at) VALUES ($1, $2, $3, $4, $5, $6)`,
        { bind: [id, createdAt, index + 1, code, 40 * (index + 1), new Date(Date.now() - ago * MINUTE)] },
      );
    }
    await db.sequelize.query('UPDATE webhook_deliveries SET attempts = $2 WHERE id = $1', { bind: [id, attempts.length] });
    return id;
  }

  it('when the upgrade runs over a logged history, then every figure is in the counts at once; later changes keep them exact; undone, the tables go', async () => {
    const migrator = createMigrator(db.sequelize);
    await migrator.down({ to: STATS_MIGRATION });
    expect(await statsTables()).toEqual([]);
    const endpoint = await db.models.WebhookEndpoint.create({ url: 'https://a.example.com/hooks', secret: 'whsec_x', events: [], active: true, description: null });
    await logged(endpoint.id, 'succeeded', [[503, 90], [200, 80]]);
    const failed = await logged(endpoint.id, 'failed', [[500, 70], [null, 65], [500, 3]]);
    await logged(endpoint.id, 'pending', [[503, 2]]);
    await logged(endpoint.id, 'succeeded', [[204, 60 * 30]]);
    const before = await countsFromLog(db.sequelize);

    await migrator.up();

    expect(await countsKept(db.sequelize)).toEqual(before);
    expect(before.reduce((all, row) => [all[0] + row.succeeded, all[1] + row.retried, all[2] + row.failed], [0, 0, 0])).toEqual([2, 4, 1]);
    // A recovery after the upgrade turns the failed attempt folded by the migration into retried.
    await db.sequelize.query(`UPDATE webhook_deliveries SET status = 'pending' WHERE id = $1`, { bind: [failed] });
    expect(await countsKept(db.sequelize)).toEqual(await countsFromLog(db.sequelize));
    const [last] = await db.sequelize.query<{ success: Date }>('SELECT last_success_at AS success FROM webhook_stats_last WHERE endpoint_id = $1', {
      bind: [endpoint.id],
      type: QueryTypes.SELECT,
    });
    expect(Math.round((Date.now() - last.success.getTime()) / MINUTE)).toBe(80);

    await migrator.down({ to: STATS_MIGRATION });
    expect(await statsTables()).toEqual([]);
    await migrator.up();
    expect(await countsKept(db.sequelize)).toEqual(await countsFromLog(db.sequelize));
  });
});
