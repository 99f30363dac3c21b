import type { ChildProcess } from 'node:child_process';
import { Queue } from 'bullmq';
import { QueryTypes } from 'sequelize';
import { loadConfig } from '../../shared/config';
import { createDatabase, Database } from '../../shared/db';
import { createRedis, deleteKeysByPrefix } from '../../shared/redis';
import { RETENTION_SCHEDULER_ID, maintenanceQueueName } from '../../services/webhook-worker/src/retention';
import { TestEnvironment, createTestEnvironment, processEnv } from '../support/environment';
import { ServiceProcess, startService } from '../support/processes';
import { exited, freePort, startRedisServer } from './support/processes';
import { waitFor } from '../support/wait-for';

const DAY_MS = 86_400_000;
/** docs/design.md §15.1: with Redis restarted empty, the horizon and the daily schedules are back within a minute. */
const PROMISE_MS = 60_000;

/** docs/design.md §3.5 and §15.1: what lives in Redis comes back without a restart. */
describe('fault: Redis loses the daily schedules', () => {
  let env: TestEnvironment;
  let db: Database;
  const services: ServiceProcess[] = [];

  beforeAll(async () => {
    env = await createTestEnvironment({}, 'worker');
    db = createDatabase(env.databaseUrl, { poolMax: 2 });
  });

  afterAll(async () => {
    await Promise.all(services.map((service) => service.stop()));
    await db.close();
    await env.cleanup();
  });

  /** The ids of the maintenance queue's job schedulers in the Redis at `redisUrl`. */
  async function schedulers(redisUrl: string): Promise<string[]> {
    const config = loadConfig({ REDIS_URL: redisUrl, REDIS_PREFIX: env.redisPrefix }, 'cli');
    const connection = createRedis(config, 'client');
    connection.on('error', () => undefined);
    const queue = new Queue(maintenanceQueueName(config), { connection, prefix: env.redisPrefix });
    try {
      return (await queue.getJobSchedulers()).map((scheduler) => scheduler.key);
    } catch {
      return [];
    } finally {
      await queue.close().catch(() => undefined);
      connection.disconnect();
    }
  }

  const stamp = (day: Date) => day.toISOString().slice(0, 10).replace(/-/g, '');
  const partitionsAhead = async (days: number): Promise<number> => {
    const day = stamp(new Date(Date.now() + days * DAY_MS));
    const [row] = await db.sequelize.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_class WHERE relispartition AND relname IN ($1, $2, $3)`,
      { bind: [`webhook_attempts_p${day}`, `webhook_deliveries_p${day}`, `webhook_events_p${day}`], type: QueryTypes.SELECT },
    );
    return row.n;
  };
  const dropDayAhead = async (days: number) => {
    const day = stamp(new Date(Date.now() + days * DAY_MS));
    for (const table of ['webhook_attempts', 'webhook_deliveries', 'webhook_events']) await db.sequelize.query(`DROP TABLE IF EXISTS ${table}_p${day}`);
  };

  const startWorkerProcess = async (extra: Record<string, string>) => {
    const port = await freePort();
    const worker = await startService('worker', 'dist/services/webhook-worker/src/main.js', processEnv(env, { WORKER_METRICS_PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn', ...extra }), port);
    services.push(worker);
    return worker;
  };

  it('When the run’s Redis keys are deleted under a running worker, then its daily schedule is back within its check interval', async () => {
    const intervalMs = 1_000;
    const worker = await startWorkerProcess({ MAINTENANCE_INTERVAL_MS: String(intervalMs) });
    await waitFor(async () => (await schedulers(env.redisUrl)).length > 0 || undefined, 10_000, 'the schedule made at start');

    await deleteKeysByPrefix({ redisUrl: env.redisUrl }, env.redisPrefix);
    expect(await schedulers(env.redisUrl)).toEqual([]);

    await waitFor(async () => (await schedulers(env.redisUrl)).includes(RETENTION_SCHEDULER_ID) || undefined, intervalMs + 2_000, 'the schedule back');
    expect(await schedulers(env.redisUrl)).toEqual([RETENTION_SCHEDULER_ID]);
    await worker.stop();
  });

  it('When Redis restarts empty and no process restarts, then the partition horizon and the daily schedule are back within a minute', async () => {
    const redisPort = await freePort();
    let redis: ChildProcess = await startRedisServer(redisPort);
    const redisUrl = `redis://127.0.0.1:${redisPort}`;
    try {
      const apiPort = await freePort();
      const api = await startService('api', 'dist/services/api/src/server.js', processEnv(env, { REDIS_URL: redisUrl, PORT: String(apiPort), HOST: '127.0.0.1', LOG_LEVEL: 'warn' }), apiPort);
      services.push(api);
      const worker = await startWorkerProcess({ REDIS_URL: redisUrl });
      await waitFor(async () => (await schedulers(redisUrl)).length > 0 || undefined, 10_000, 'the schedule made at start');

      redis.kill('SIGKILL');
      await exited(redis);
      await dropDayAhead(7);
      redis = await startRedisServer(redisPort);
      const back = Date.now();

      await waitFor(
        async () => ((await schedulers(redisUrl)).includes(RETENTION_SCHEDULER_ID) && (await partitionsAhead(7)) === 3) || undefined,
        PROMISE_MS,
        'the schedule and the furthest day back',
      );
      expect(Date.now() - back).toBeLessThan(PROMISE_MS);
      expect([api.child.exitCode, worker.child.exitCode]).toEqual([null, null]);
    } finally {
      redis.kill('SIGKILL');
      await exited(redis);
    }
  }, PROMISE_MS + 30_000);
});
