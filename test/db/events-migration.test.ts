import { QueryTypes } from 'sequelize';
import { createDatabase, Database } from '../../shared/db';
import { createMigrator } from '../../shared/db/migrate';
import { TestEnvironment, createTestEnvironment } from '../support/environment';

const EVENTS_MIGRATION = '20261125000100-webhook-events.js';

/** docs/design.md §3.2: the move to events stored once keeps every row, and is reversible. */
describe('the webhook_events migration', () => {
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

  const bodies = async () =>
    db.sequelize.query<{ id: string; body: string }>('SELECT id, body FROM webhook_deliveries ORDER BY id', { type: QueryTypes.SELECT });

  it('when undone and redone over legacy and new rows, then every delivery keeps its exact bytes', async () => {
    const migrator = createMigrator(db.sequelize);
    await migrator.down({ to: EVENTS_MIGRATION });
    await db.sequelize.query(`INSERT INTO webhook_deliveries (id, url, event, body) VALUES ('msg_legacy', 'http://127.0.0.1:9/x', 'post.created', '{"legacy":"é"}')`);

    await migrator.up();
    expect(await bodies()).toEqual([{ id: 'msg_legacy', body: '{"legacy":"é"}' }]);
    await db.sequelize.query(`
      WITH ev AS (INSERT INTO webhook_events (id, created_at, kind, event, body) VALUES ('evt_new', now(), 'send', 'post.created', '{"new":"ü"}'))
      INSERT INTO webhook_deliveries (id, created_at, event_id, url, event) VALUES ('msg_new', now(), 'evt_new', 'http://127.0.0.1:9/x', 'post.created')`);

    await migrator.down({ to: EVENTS_MIGRATION });
    expect(await bodies()).toEqual([
      { id: 'msg_legacy', body: '{"legacy":"é"}' },
      { id: 'msg_new', body: '{"new":"ü"}' },
    ]);

    await migrator.up();
    expect(await bodies()).toEqual([
      { id: 'msg_legacy', body: '{"legacy":"é"}' },
      { id: 'msg_new', body: '{"new":"ü"}' },
    ]);
  });
});
