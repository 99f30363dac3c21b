import { QueryTypes } from 'sequelize';
import { createDatabase, Database } from '../../shared/db';
import { createMigrator } from '../../shared/db/migrate';
import { createTestEnvironment, TestEnvironment } from '../support/environment';
import { createUser } from '../support/factories';

const PORTAL_MIGRATION = '20261127000400-create-portal-links.js';
const HASH = (digit: string) => digit.repeat(64);

/** docs/design.md §11.6: the tables' own rules, and a reversible migration. */
describe('the portal_links migration', () => {
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

  const tables = async () =>
    (
      await db.sequelize.query<{ name: string }>(
        `SELECT tablename AS name FROM pg_tables WHERE tablename IN ('portal_links', 'portal_sessions') ORDER BY tablename`,
        { type: QueryTypes.SELECT },
      )
    ).map((row) => row.name);

  const insertLink = async (userId: number, hash: string, scope = 'manage') =>
    (
      await db.sequelize.query<{ id: number }>(
        `INSERT INTO portal_links (user_id, token_hash, scope, session_ttl_s, expires_at) VALUES ($1, $2, $3, 3600, now() + interval '1 hour') RETURNING id`,
        { bind: [userId, hash, scope], type: QueryTypes.SELECT },
      )
    )[0].id;
  const insertSession = (linkId: number, userId: number, hash: string) =>
    db.sequelize.query(`INSERT INTO portal_sessions (link_id, user_id, token_hash, scope, expires_at) VALUES ($1, $2, $3, 'manage', now() + interval '1 hour')`, {
      bind: [linkId, userId, hash],
    });

  it('when a link is opened twice, has an unknown scope or its user is deleted, then the database itself keeps the rules', async () => {
    const { user } = await createUser(db);
    const linkId = await insertLink(user.userId, HASH('a'));
    await expect(insertLink(user.userId, HASH('b'), 'admin')).rejects.toThrow(/portal_links_scope_check/);
    await insertSession(linkId, user.userId, HASH('c'));
    await expect(insertSession(linkId, user.userId, HASH('d'))).rejects.toMatchObject({ parent: { constraint: 'portal_sessions_link_id_key' } });

    await db.sequelize.query('DELETE FROM users WHERE user_id = $1', { bind: [user.userId] });
    const [{ links, sessions }] = await db.sequelize.query<{ links: number; sessions: number }>(
      'SELECT (SELECT count(*) FROM portal_links)::int AS links, (SELECT count(*) FROM portal_sessions)::int AS sessions',
      { type: QueryTypes.SELECT },
    );
    expect({ links, sessions }).toEqual({ links: 0, sessions: 0 });
  });

  it('when undone and redone, then both tables go and come back', async () => {
    const migrator = createMigrator(db.sequelize);
    expect(await tables()).toEqual(['portal_links', 'portal_sessions']);
    await migrator.down({ to: PORTAL_MIGRATION });
    expect(await tables()).toEqual([]);
    await migrator.up();
    expect(await tables()).toEqual(['portal_links', 'portal_sessions']);
  });
});
