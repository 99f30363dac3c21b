import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { Config, loadConfig, ServiceName } from '../../shared/config';
import { deleteKeysByPrefix } from '../../shared/redis';
import { testServices, withDatabase } from './services';

/** A test file's own PostgreSQL database (a migrated clone) and Redis key prefix. */
export interface TestEnvironment {
  config: Config;
  databaseUrl: string;
  redisUrl: string;
  redisPrefix: string;
  /** Drops the database and deletes every Redis key under the prefix. */
  cleanup(): Promise<void>;
}

/**
 * WEBHOOK_QUEUE_PARTITIONS of the test run, when set (`WEBHOOK_QUEUE_PARTITIONS=4 npx jest
 * test/worker/...` runs the delivery tests over a partitioned queue), for every config and
 * process the tests make; a test's own value wins.
 */
function partitionsOfRun(): Record<string, string> {
  const partitions = process.env.WEBHOOK_QUEUE_PARTITIONS;
  return partitions ? { WEBHOOK_QUEUE_PARTITIONS: partitions } : {};
}

/**
 * Creates a fresh, migrated database and a fresh Redis prefix for one test file, and a
 * Config pointing at them (log level silent unless LOG_LEVEL is set).
 *
 * @param env - extra environment variables for loadConfig, e.g. `{ API_LAYOUT: 'b' }`
 * @param service - which service the config is for (picks default ports)
 */
export async function createTestEnvironment(
  env: Record<string, string> = {},
  service: ServiceName = 'api',
): Promise<TestEnvironment> {
  const { adminDatabaseUrl, redisUrl, runId, templateDatabase } = testServices();
  const suffix = randomBytes(4).toString('hex');
  const database = `pwt_${runId}_${suffix}`;
  const redisPrefix = `t${runId}${suffix}`;
  await withAdmin(adminDatabaseUrl, (admin) => admin.query(`CREATE DATABASE "${database}" TEMPLATE "${templateDatabase}"`));
  const databaseUrl = withDatabase(adminDatabaseUrl, database);
  const config = loadConfig(
    {
      NODE_ENV: 'test',
      LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent',
      DATABASE_URL: databaseUrl,
      REDIS_URL: redisUrl,
      REDIS_PREFIX: redisPrefix,
      PORT: '0',
      HOST: '127.0.0.1',
      APP_URL: 'http://localhost:3000',
      ...partitionsOfRun(),
      ...env,
    },
    service,
  );
  return {
    config,
    databaseUrl,
    redisUrl,
    redisPrefix,
    async cleanup() {
      await withAdmin(adminDatabaseUrl, (admin) => admin.query(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`));
      await deleteKeysByPrefix({ redisUrl }, redisPrefix);
    },
  };
}

/**
 * The variables a process the test spawns (a service or a CLI) needs to use the test's own
 * database and Redis prefix, with NODE_ENV=test; `extra` adds or overrides.
 */
export function processEnv(
  env: Pick<TestEnvironment, 'databaseUrl' | 'redisUrl' | 'redisPrefix'>,
  extra: Record<string, string> = {},
): Record<string, string> {
  return { NODE_ENV: 'test', DATABASE_URL: env.databaseUrl, REDIS_URL: env.redisUrl, REDIS_PREFIX: env.redisPrefix, ...partitionsOfRun(), ...extra };
}

async function withAdmin<T>(url: string, work: (admin: Client) => Promise<T>): Promise<T> {
  const admin = new Client({ connectionString: url });
  await admin.connect();
  try {
    return await work(admin);
  } finally {
    await admin.end();
  }
}
