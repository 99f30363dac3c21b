import { QueryTypes } from 'sequelize';
import { createDatabase, Database } from '../../shared/db';
import { createMigrator } from '../../shared/db/migrate';
import { TestEnvironment, createTestEnvironment } from '../support/environment';

const MIGRATION = '20261128000100-endpoint-episodes.js';

/** docs/design.md §6.6: the failure episode's columns of webhook_endpoints, and the way back. */
describe('the endpoint episodes migration', () => {
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

  const insert = (url: string, failing: boolean) =>
    db.sequelize.query(`INSERT INTO webhook_endpoints (url, secret, failing_since, created_at, updated_at) VALUES ($1, 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', $2, now(), now())`, {
      bind: [url, failing ? new Date('2026-11-20T10:00:00Z') : null],
    });
  const rows = () =>
    db.sequelize.query<Record<string, unknown>>(
      'SELECT url, failing_since, episode_id, consecutive_failures, episode_events FROM webhook_endpoints ORDER BY url',
      { type: QueryTypes.SELECT },
    );

  it('when undone and redone, then an endpoint failing before gets an episode of its own with one failure, and the CHECK keeps episode and failing_since together', async () => {
    const migrator = createMigrator(db.sequelize);
    await migrator.down({ to: MIGRATION });
    await insert('https://a.example.com/healthy', false);
    await insert('https://b.example.com/failing', true);

    await migrator.up();

    expect(await rows()).toEqual([
      { url: 'https://a.example.com/healthy', failing_since: null, episode_id: null, consecutive_failures: 0, episode_events: [] },
      {
        url: 'https://b.example.com/failing',
        failing_since: new Date('2026-11-20T10:00:00Z'),
        episode_id: expect.stringMatching(/^epi_[A-Za-z0-9_-]{22}$/),
        consecutive_failures: 1,
        episode_events: [],
      },
    ]);
    await expect(db.sequelize.query(`UPDATE webhook_endpoints SET failing_since = now() WHERE url = 'https://a.example.com/healthy'`)).rejects.toThrow(
      /webhook_endpoints_episode_check/,
    );

    await migrator.down({ to: MIGRATION });
    const [failing] = await db.sequelize.query<Record<string, unknown>>(`SELECT * FROM webhook_endpoints WHERE url = 'https://b.example.com/failing'`, {
      type: QueryTypes.SELECT,
    });
    expect(failing.failing_since).toEqual(new Date('2026-11-20T10:00:00Z'));
    expect(Object.keys(failing)).not.toContain('episode_id');
    await migrator.up();
  });
});
