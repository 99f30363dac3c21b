import { QueryTypes } from 'sequelize';
import { createDatabase, Database } from '../../shared/db';
import { createMigrator } from '../../shared/db/migrate';
import { createTestEnvironment, TestEnvironment } from '../support/environment';

const MIGRATION = '20261128000200-endpoint-auth-and-client-certificate.js';

/** docs/design.md §14.4 (`auth`, `client_certificate`): the columns' own rules, and a reversible migration. */
describe('the endpoint auth and client certificate migration', () => {
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

  const columns = async () =>
    (
      await db.sequelize.query<{ name: string }>(
        `SELECT column_name AS name FROM information_schema.columns
          WHERE table_name = 'webhook_endpoints' AND column_name IN ('auth', 'client_cert', 'client_key') ORDER BY column_name`,
        { type: QueryTypes.SELECT },
      )
    ).map((row) => row.name);
  const insert = (auth: string | null, cert: string | null, key: string | null) =>
    db.sequelize.query(`INSERT INTO webhook_endpoints (url, secret, auth, client_cert, client_key) VALUES ('https://h.example/', 's', $1::jsonb, $2, $3)`, {
      bind: [auth, cert, key],
    });

  it('when a certificate comes without its key, or auth is not an object, then the database itself refuses it', async () => {
    await expect(insert(null, 'CERT', null)).rejects.toThrow(/webhook_endpoints_client_certificate_pair/);
    await expect(insert(null, null, 'KEY')).rejects.toThrow(/webhook_endpoints_client_certificate_pair/);
    await expect(insert('"oauth2"', null, null)).rejects.toThrow(/webhook_endpoints_auth_object/);
    await expect(insert('{"type": "oauth2_client_credentials"}', 'CERT', 'KEY')).resolves.toBeDefined();
  });

  it('when undone and redone, then the three columns go and come back', async () => {
    const migrator = createMigrator(db.sequelize);
    expect(await columns()).toEqual(['auth', 'client_cert', 'client_key']);
    await migrator.down({ to: MIGRATION });
    expect(await columns()).toEqual([]);
    await migrator.up();
    expect(await columns()).toEqual(['auth', 'client_cert', 'client_key']);
  });
});
