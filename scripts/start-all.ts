import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { concurrently } from 'concurrently';
import { loadConfig } from '../shared/config';
import { createDatabase } from '../shared/db';
import { createMigrator, projectRoot } from '../shared/db/migrate';
import { createRedis, describeRedisTarget } from '../shared/redis';
import { SERVICES } from './services';

/**
 * Checks the environment, PostgreSQL and Redis, and applies pending migrations, so that a
 * missing dependency is one clear line naming the variable to set, never a stack trace
 * from four processes at once.
 *
 * @throws Error with that line as its message
 */
async function prepare(): Promise<void> {
  const config = loadConfig(process.env, 'cli');
  // Creates the database named in DATABASE_URL when missing; on failure it has printed why.
  try {
    execFileSync(process.execPath, [path.join(projectRoot(), 'scripts', 'create-database.js')], { stdio: 'inherit' });
  } catch {
    process.exit(1);
  }
  const database = createDatabase(config.databaseUrl, { poolMax: 1 });
  try {
    const applied = await createMigrator(database.sequelize).up();
    if (applied.length > 0) console.log(`applied ${applied.length} pending migration(s)`);
  } finally {
    await database.close();
  }
  const redis = createRedis(config, 'client', { lazyConnect: true, retryStrategy: () => null });
  let cause = '';
  redis.on('error', (error: Error) => (cause ||= error.message));
  try {
    await redis.connect();
    await redis.ping();
  } catch (error) {
    throw new Error(`Cannot reach Redis at ${describeRedisTarget(config)}: ${cause || (error as Error).message}.`);
  } finally {
    redis.disconnect();
  }
}

/**
 * `npm start`: runs every service of {@link SERVICES} against DATABASE_URL and REDIS_URL
 * with name-prefixed logs. Ctrl-C (SIGINT) or SIGTERM reaches every child, and the first
 * one to fail stops the rest, so nothing is left running.
 */
async function startAll(): Promise<void> {
  try {
    await prepare();
  } catch (error) {
    console.error(error instanceof Error ? error.message : String(error));
    process.exit(1);
  }
  const { result } = concurrently(
    SERVICES.map(({ name, command, env }) => ({ name, command, env })),
    { cwd: projectRoot(), prefix: 'name', padPrefix: true, killOthersOn: ['failure'] },
  );
  result.then(
    () => process.exit(0),
    () => process.exit(1),
  );
}

void startAll();
