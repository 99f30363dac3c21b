import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { Client } from 'pg';
import { createDatabase } from '../../shared/db';
import { createMigrator } from '../../shared/db/migrate';
import { dockerMayAnswer, publishServices, withDatabase } from './services';

const ROOT = path.resolve(__dirname, '../..');
const { needsBuild } = require('../../scripts/run-built.js') as { needsBuild(root: string): boolean };

/**
 * Builds dist/ if a source is newer. Chooses the run's PostgreSQL and Redis: containers when
 * a Docker engine answers, else DATABASE_URL / REDIS_URL, else the local services. Then
 * migrates a template database with the real migrations; each test file clones it (see
 * database.ts).
 */
export default async function globalSetup(): Promise<void> {
  buildIfStale();
  const containers = await startContainers();
  const adminDatabaseUrl = withDatabase(
    containers?.databaseUrl ?? process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
    'postgres',
  );
  const redisUrl = containers?.redisUrl ?? process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  const runId = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
  const templateDatabase = `pwt_${runId}_tpl`;

  const admin = new Client({ connectionString: adminDatabaseUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE "${templateDatabase}"`);
  } finally {
    await admin.end();
  }
  const database = createDatabase(withDatabase(adminDatabaseUrl, templateDatabase), { poolMax: 1 });
  try {
    await createMigrator(database.sequelize).up();
  } finally {
    await database.close();
  }
  publishServices({ adminDatabaseUrl, redisUrl, runId, templateDatabase });
}

async function startContainers(): Promise<{ databaseUrl: string; redisUrl: string } | undefined> {
  if (!dockerMayAnswer()) return undefined;
  try {
    const { GenericContainer, Wait, getContainerRuntimeClient } = await import('testcontainers');
    await getContainerRuntimeClient();
    const postgres = await new GenericContainer('postgres:16-alpine')
      .withEnvironment({ POSTGRES_HOST_AUTH_METHOD: 'trust' })
      .withExposedPorts(5432)
      .withWaitStrategy(Wait.forLogMessage(/database system is ready to accept connections/, 2))
      .start();
    const redis = await new GenericContainer('redis:7-alpine')
      .withExposedPorts(6379)
      .withWaitStrategy(Wait.forLogMessage(/Ready to accept connections/))
      .start();
    (globalThis as { testContainers?: unknown }).testContainers = [postgres, redis];
    return {
      databaseUrl: `postgres://postgres@${postgres.getHost()}:${postgres.getMappedPort(5432)}/postgres`,
      redisUrl: `redis://${redis.getHost()}:${redis.getMappedPort(6379)}`,
    };
  } catch {
    // No engine answered: fall back to DATABASE_URL / REDIS_URL or the local services.
    return undefined;
  }
}

/**
 * Many tests start the built services and CLIs as processes; `npm test` builds first, but a
 * plain `npx jest <file>` after an edit would otherwise run a missing or stale dist/.
 */
function buildIfStale(): void {
  if (!needsBuild(ROOT)) return;
  const result = spawnSync(process.execPath, [path.join(ROOT, 'scripts/run-built.js'), '--build'], { cwd: ROOT, stdio: 'inherit' });
  if (result.status !== 0) throw new Error('the build failed (npm run build), so the tests would run stale code');
}
