import { createHash } from 'node:crypto';
import { QueryTypes } from 'sequelize';
import { createDatabase, Database } from '../../shared/db';
import { createTestEnvironment, TestEnvironment } from '../support/environment';
import { runScript } from '../support/processes';

const DEV_KEY = 'sk_dev_local_only_do_not_deploy_0123456789abcdefg';
const sha256 = (value: string) => createHash('sha256').update(value, 'utf8').digest('hex');

/** docs/design.md §4 "Seeding": `npm run db:seed` (sequelize-cli) by environment. */
describe('seeding by environment', () => {
  const environments: TestEnvironment[] = [];
  const databases: Database[] = [];

  afterAll(async () => {
    await Promise.all(databases.map((db) => db.close()));
    await Promise.all(environments.map((env) => env.cleanup()));
  });

  async function freshDatabase() {
    const env = await createTestEnvironment();
    const db = createDatabase(env.databaseUrl, { poolMax: 1 });
    environments.push(env);
    databases.push(db);
    return { env, db };
  }

  async function seed(env: TestEnvironment, vars: Record<string, string>) {
    const result = await runScript(require.resolve('sequelize-cli/lib/sequelize'), ['db:seed:all'], {
      DATABASE_URL: env.databaseUrl,
      SEED_DEMO: '',
      ...vars,
    });
    expect({ code: result.code, stderr: result.stderr }).toEqual({ code: 0, stderr: expect.any(String) });
    return result.stdout
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line));
  }

  const rows = async (db: Database) => ({
    users: await db.sequelize.query<{ user_id: number; api_token_hash: string }>('SELECT user_id, api_token_hash FROM users ORDER BY user_id', { type: QueryTypes.SELECT }),
    keys: await db.sequelize.query<{ id: number; key_hash: string; scopes: string[] }>('SELECT id, key_hash, scopes FROM service_keys ORDER BY id', { type: QueryTypes.SELECT }),
  });

  it('when seeded outside production, then users 1 and 2 and the development service key exist, and nothing is printed', async () => {
    const { env, db } = await freshDatabase();
    expect(await seed(env, { NODE_ENV: 'development' })).toEqual([]);
    const { users, keys } = await rows(db);
    expect(users).toEqual([
      { user_id: 1, api_token_hash: sha256('dev-token-user-1') },
      { user_id: 2, api_token_hash: sha256('dev-token-user-2') },
    ]);
    expect(keys).toEqual([{ id: expect.any(Number), key_hash: sha256(DEV_KEY), scopes: ['*'] }]);
  });

  it('when seeded in production with SEED_DEMO=true, then the development credentials are seeded', async () => {
    const { env, db } = await freshDatabase();
    expect(await seed(env, { NODE_ENV: 'production', SEED_DEMO: 'true' })).toEqual([]);
    const { users, keys } = await rows(db);
    expect(users.map((user) => user.api_token_hash)).toEqual([sha256('dev-token-user-1'), sha256('dev-token-user-2')]);
    expect(keys.map((key) => key.key_hash)).toEqual([sha256(DEV_KEY)]);
  });

  it('when seeded in production, then user 1 and one * key get random secrets printed once, no known credential exists, and a second seed creates nothing', async () => {
    const { env, db } = await freshDatabase();
    const printed = await seed(env, { NODE_ENV: 'production' });
    expect(printed).toEqual([
      { kind: 'user', user_id: 1, token: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) },
      { kind: 'service_key', id: expect.any(Number), key: expect.stringMatching(/^sk_[A-Za-z0-9_-]{43}$/), scopes: ['*'] },
    ]);
    const [user, key] = printed;
    const before = await rows(db);
    expect(before.users).toEqual([{ user_id: 1, api_token_hash: sha256(user.token) }]);
    expect(before.keys).toEqual([{ id: key.id, key_hash: sha256(key.key), scopes: ['*'] }]);

    // Even with the seeders' bookkeeping gone (db:seed:undo:all and the like), nothing new appears.
    await db.sequelize.query('DELETE FROM "SequelizeData"');
    expect(await seed(env, { NODE_ENV: 'production' })).toEqual([]);
    expect(await rows(db)).toEqual(before);
  });
});
