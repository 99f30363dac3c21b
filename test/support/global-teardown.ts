import { Client } from 'pg';
import { deleteKeysByPrefix } from '../../shared/redis';
import { testServices } from './services';

/** Drops every database and Redis key of this run, then stops containers if the setup started any. */
export default async function globalTeardown(): Promise<void> {
  const { adminDatabaseUrl, redisUrl, runId } = testServices();
  const admin = new Client({ connectionString: adminDatabaseUrl });
  await admin.connect();
  try {
    const { rows } = await admin.query<{ datname: string }>('SELECT datname FROM pg_database WHERE datname LIKE $1', [
      `pwt_${runId}_%`,
    ]);
    for (const { datname } of rows) await admin.query(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`);
  } finally {
    await admin.end();
  }
  await deleteKeysByPrefix({ redisUrl }, `t${runId}`);
  const containers = (globalThis as { testContainers?: { stop(): Promise<unknown> }[] }).testContainers ?? [];
  await Promise.all(containers.map((container) => container.stop()));
}
