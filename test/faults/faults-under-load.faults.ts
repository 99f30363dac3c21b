import type { ChildProcess } from 'node:child_process';
import { startOwnPostgres, type OwnPostgres } from '../support/own-postgres';
import { freePort } from '../support/processes';
import { exited, startRedisServer } from '../worker/support/processes';
import { PG_OUTAGE_MS, REDIS_RECOVERY_PROMISE_S, SETTLE_MS, sleep, startLoadHarness, type LoadHarness } from './support/under-load';

/**
 * docs/design.md §15: the fault promises under load (test/faults/support/under-load.ts) over a
 * PostgreSQL cluster and a redis-server of this suite's own, so it can kill them.
 */
describe('faults under load (docs/design.md §15)', () => {
  let postgres: OwnPostgres;
  let redisPort: number;
  let redis: ChildProcess;
  let harness: LoadHarness;

  beforeAll(async () => {
    postgres = await startOwnPostgres(await freePort());
    redisPort = await freePort();
    redis = await startRedisServer(redisPort);
    harness = await startLoadHarness({
      adminUrl: postgres.url(),
      checkUrl: () => postgres.url('faults'),
      serviceEnv: { REDIS_URL: `redis://127.0.0.1:${redisPort}` },
    });
  }, 180_000);

  afterAll(async () => {
    await harness?.close();
    if (redis) {
      redis.kill('SIGKILL');
      await exited(redis);
    }
    await postgres?.destroy();
  });

  /** PostgreSQL stops at once and starts again after `ms`. */
  const stopPostgres = (ms: number): (() => Promise<void>) => async () => {
    await postgres.stopImmediately();
    await sleep(ms);
    await postgres.start();
  };

  it('when a worker, Redis, an api and PostgreSQL fail in turn under load, then no acknowledged change is lost and every process lives', async () => {
    const outcome = await harness.underLoad('turns', [
      {
        // Its jobs' locks expire and the other worker, or its restart, takes them.
        name: 'worker SIGKILL',
        inject: async () => {
          await harness.services.get('worker-1')!.stop('SIGKILL');
          await harness.start('worker-1');
        },
        settleMs: SETTLE_MS,
      },
      {
        // Every queued job is gone: the outbox puts them back.
        name: 'Redis SIGKILL, restarted empty',
        inject: async () => {
          redis.kill('SIGKILL');
          await exited(redis);
          redis = await startRedisServer(redisPort);
        },
        settleMs: SETTLE_MS + 4_000,
      },
      {
        name: 'api SIGKILL',
        inject: async () => {
          await harness.services.get('api-a')!.stop('SIGKILL');
          await harness.start('api-a');
        },
        settleMs: SETTLE_MS,
      },
      { name: `PostgreSQL stopped ${PG_OUTAGE_MS / 1000} s`, inject: stopPostgres(PG_OUTAGE_MS), settleMs: SETTLE_MS },
    ]);

    harness.expectNothingLost(outcome);
    expect(outcome.changes.filter((change) => change.acknowledged).length).toBeGreaterThan(500);
    // The PostgreSQL window was really under load, and the apis said 503 in it.
    expect(harness.sentDuring(outcome, outcome.faults[3]).some((change) => change.status === 503)).toBe(true);
    expect(outcome.rows[1].recoverS).toBeLessThanOrEqual(REDIS_RECOVERY_PROMISE_S);
  });

  it('when PostgreSQL is away for 60 s under load, then both workers ride it out and deliver everything after', async () => {
    const outcome = await harness.underLoad('long', [{ name: 'PostgreSQL stopped 60 s', inject: stopPostgres(60_000), settleMs: SETTLE_MS }]);

    harness.expectNothingLost(outcome);
    const during = harness.sentDuring(outcome, outcome.faults[0]);
    expect(during.length).toBeGreaterThan(100);
    expect(during.every((change) => change.status === 503 || change.status === null || change.acknowledged)).toBe(true);
  });
});
