import { QueryTypes } from 'sequelize';
import { createDatabase, Database } from '../../shared/db';
import { createMigrator } from '../../shared/db/migrate';
import { TestEnvironment, createTestEnvironment } from '../support/environment';

const MIGRATION = '20261127000310-event-kind-operational.js';

/** docs/design.md §6.6: events of kind `operational`, and the way back to `notice`. */
describe('the operational event kind migration', () => {
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

  const insert = (id: string, kind: string) =>
    db.sequelize.query(`INSERT INTO webhook_events (id, created_at, kind, event, body) VALUES ($1, now(), $2, 'endpoint.disabled', '{}')`, { bind: [id, kind] });
  const kinds = async () =>
    (await db.sequelize.query<{ id: string; kind: string }>('SELECT id, kind FROM webhook_events ORDER BY id', { type: QueryTypes.SELECT })).map((row) => [row.id, row.kind]);

  it('when undone and redone, then operational rows become notices and back, and nothing else is allowed in', async () => {
    await insert('evt_old', 'notice');
    await insert('evt_new', 'operational');
    await expect(insert('evt_bad', 'other')).rejects.toThrow(/webhook_events_kind_check/);

    const migrator = createMigrator(db.sequelize);
    await migrator.down({ to: MIGRATION });
    expect(await kinds()).toEqual([['evt_new', 'notice'], ['evt_old', 'notice']]);
    await expect(insert('evt_later', 'operational')).rejects.toThrow(/webhook_events_kind_check/);

    await migrator.up();
    await insert('evt_later', 'operational');
    expect(await kinds()).toEqual([['evt_later', 'operational'], ['evt_new', 'notice'], ['evt_old', 'notice']]);
  });
});
