import { createHash, randomBytes } from 'node:crypto';
import { deleteKeysByPrefix } from '../../shared/redis';
import { Client } from 'pg';
import { createDatabase } from '../../shared/db';
import { createMigrator } from '../../shared/db/migrate';
import { Build, requireFrom, THIS_BUILD } from './children';
import { Scope } from './scope';

/** The run's own database, migrated, with one user whose token the harness knows. */
export interface BenchDatabase {
  name: string;
  url: string;
  userId: number;
  /** The bearer token of `userId` (stored only as its sha256, as the api expects). */
  token: string;
}

/**
 * Creates `pw_bench_<random>` on the server of `serverUrl`, runs the real migrations, and
 * inserts one user with quota 0 (unlimited) and a random token. The database is dropped (WITH
 * FORCE, so leftover connections do not block it) when the scope closes.
 *
 * @param serverUrl - any postgres:// URL of the server; its database part is ignored
 * @param options - `migrateTo`: stop after this migration (its file name) instead of running all;
 *   `build`: whose migrations run (another checkout's, for the versus section); default this one's
 */
export async function createBenchDatabase(
  scope: Scope,
  serverUrl: string,
  options: { migrateTo?: string; build?: Build } = {},
): Promise<BenchDatabase> {
  const name = `pw_bench_${randomBytes(4).toString('hex')}`;
  const adminUrl = withDatabase(serverUrl, 'postgres');
  await withClient(adminUrl, (admin) => admin.query(`CREATE DATABASE "${name}"`));
  scope.add(`database ${name}`, async () => {
    await withClient(adminUrl, (admin) => admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`));
  });
  const url = withDatabase(serverUrl, name);
  const build = options.build ?? THIS_BUILD;
  const db = build === THIS_BUILD ? { createDatabase } : requireFrom<{ createDatabase: typeof createDatabase }>(build, 'shared', 'db', 'index.js');
  const migrate = build === THIS_BUILD ? { createMigrator } : requireFrom<{ createMigrator: typeof createMigrator }>(build, 'shared', 'db', 'migrate.js');
  const database = db.createDatabase(url, { poolMax: 1 });
  try {
    await migrate.createMigrator(database.sequelize).up(options.migrateTo ? { to: options.migrateTo } : {});
  } finally {
    await database.close();
  }
  const token = randomBytes(32).toString('base64url');
  const userId = 1;
  await withClient(url, (client) =>
    client.query(
      `INSERT INTO users (user_id, user_name, user_email, api_token_hash, quota_limit) VALUES ($1, 'Bench', 'bench@example.com', $2, 0)`,
      [userId, createHash('sha256').update(token, 'utf8').digest('hex')],
    ),
  );
  return { name, url, userId, token };
}

/** Opens one pg client on `url`, runs `work`, and always closes the client. */
export async function withClient<T>(url: string, work: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/** `url` with its database replaced. */
export function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = '/' + encodeURIComponent(database);
  return parsed.toString();
}

/**
 * A Redis key prefix unique to this run (`pwbench<random>`), whose keys are all deleted when
 * the scope closes. Child processes get it, or a longer one starting with it, as REDIS_PREFIX.
 */
export function createBenchRedisPrefix(scope: Scope, redisUrl: string): string {
  const prefix = `pwbench${randomBytes(4).toString('hex')}`;
  scope.add(`redis keys ${prefix}*`, () => deleteKeysByPrefix({ redisUrl }, prefix));
  return prefix;
}

