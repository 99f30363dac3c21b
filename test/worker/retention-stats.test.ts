import { QueryTypes } from 'sequelize';
import { createRetention } from '../../services/webhook-worker/src/retention';
import { createDatabase, Database } from '../../shared/db';
import { foldStats } from '../../shared/stats/fold';
import { insertDelivery } from '../api/support/operations';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { createUser } from '../support/factories';
import { silentLogger } from './support/harness';

const DAY_MS = 86_400_000;

/** docs/design.md §11, §14: the daily prune drops the stats counts by day with the log, and the expired portal links and sessions. */
describe('retention of the stats counts and portal links', () => {
  let env: TestEnvironment;
  let db: Database;

  beforeAll(async () => {
    env = await createTestEnvironment({ WEBHOOK_RETENTION_DAYS: '30' }, 'worker');
    db = createDatabase(env.config.databaseUrl, { poolMax: 2 });
  });

  afterAll(async () => {
    await db.close();
    await env.cleanup();
  });

  const attempted = async (endpointId: number, at: Date, statusCode: number) => {
    const id = await insertDelivery(db, { endpointId, status: 'succeeded', createdAt: at });
    await db.sequelize.query(
      'INSERT INTO webhook_attempts (delivery_id, delivery_created_at, attempt_number, status_code, duration_ms, attempted_at) VALUES ($1, $2, 1, $3, 12, $2)',
      { bind: [id, at, statusCode] },
    );
  };
  const portalLink = async (userId: number, hash: string, expiresIn: string, sessionExpiresIn?: string) => {
    const [{ id }] = await db.sequelize.query<{ id: number }>(
      `INSERT INTO portal_links (user_id, token_hash, scope, session_ttl_s, expires_at) VALUES ($1, $2, 'read', 3600, now() + $3::interval) RETURNING id`,
      { bind: [userId, hash.repeat(64), expiresIn], type: QueryTypes.SELECT },
    );
    if (sessionExpiresIn) {
      await db.sequelize.query(`INSERT INTO portal_sessions (link_id, user_id, token_hash, scope, expires_at) VALUES ($1, $2, $3, 'read', now() + $4::interval)`, {
        bind: [id, userId, `s${hash}`.repeat(32), sessionExpiresIn],
      });
    }
    return id;
  };

  it('when the prune runs, then the counts of days past the window go, the last failure stays, and expired portal links and sessions are removed', async () => {
    const endpoint = await db.models.WebhookEndpoint.create({ url: 'https://a.example.com/hooks', secret: 'whsec_x', events: [], active: true, description: null });
    const old = new Date(Date.now() - 40 * DAY_MS);
    await attempted(endpoint.id, old, 500);
    await attempted(endpoint.id, new Date(Date.now() - DAY_MS), 200);
    await foldStats(db.sequelize);
    const { user } = await createUser(db);
    await portalLink(user.userId, 'a', '-1 hour');
    const liveSession = await portalLink(user.userId, 'b', '-1 hour', '1 hour');
    await portalLink(user.userId, 'c', '-2 hours', '-1 hour');
    const unexpired = await portalLink(user.userId, 'd', '1 hour');

    const retention = createRetention({ config: env.config, sequelize: db.sequelize, logger: silentLogger, schedule: false });
    await retention.prune();
    await retention.close();

    const starts = await db.sequelize.query<{ start: Date }>('SELECT DISTINCT start FROM webhook_stats WHERE span_minutes = 1', { type: QueryTypes.SELECT });
    expect(starts.map((row) => Math.round((Date.now() - row.start.getTime()) / DAY_MS))).toEqual([1]);
    const [last] = await db.sequelize.query<{ failure: Date }>('SELECT last_failure_at AS failure FROM webhook_stats_last WHERE endpoint_id = $1', {
      bind: [endpoint.id],
      type: QueryTypes.SELECT,
    });
    expect(last.failure.toISOString()).toBe(old.toISOString());
    const links = await db.sequelize.query<{ id: number }>('SELECT id FROM portal_links ORDER BY id', { type: QueryTypes.SELECT });
    expect(links.map((row) => row.id)).toEqual([liveSession, unexpired]);
    const sessions = await db.sequelize.query<{ link_id: number }>('SELECT link_id FROM portal_sessions', { type: QueryTypes.SELECT });
    expect(sessions.map((row) => row.link_id)).toEqual([liveSession]);
  });
});
