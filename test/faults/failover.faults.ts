import type { ChildProcess } from 'node:child_process';
import { startOwnPostgres, startPrimaryWithStandby, type OwnPostgres, type PrimaryWithStandby } from '../support/own-postgres';
import { freePort } from '../support/processes';
import { SENTINEL_PRIMARY_NAME, startRedisSentinels, type RedisSentinelSet } from '../support/redis-sentinel';
import { exited, startRedisServer } from '../worker/support/processes';
import { SETTLE_MS, sleep, startLoadHarness, type LoadHarness } from './support/under-load';
import { waitFor } from '../support/wait-for';

/**
 * docs/design.md §15.1: failovers under the same load as test/faults/faults-under-load.faults.ts.
 * Redis: a primary with one replica and three Sentinels (down-after-milliseconds 1000), a
 * forced `SENTINEL FAILOVER`, then the new primary killed outright. PostgreSQL: a primary
 * replicating synchronously to one standby, reached through one address (a TCP proxy standing
 * in for a DNS name or VIP) that first reaches the standby while it is read-only, then the
 * primary stopped and the standby promoted.
 */

/** The job lock of this row's workers: a job whose lock the failover lost is taken over after it. */
const LOCK_DURATION_MS = 10_000;
/** docs/design.md §13.2: every acknowledged event arrives within 10 s of the promotion + WORKER_LOCK_DURATION_MS. */
const SENTINEL_RECOVERY_PROMISE_S = 10 + LOCK_DURATION_MS / 1000;

describe('failovers under load (docs/design.md §15.1)', () => {
  let postgres: OwnPostgres;
  let sentinels: RedisSentinelSet;
  let harness: LoadHarness;

  beforeAll(async () => {
    [postgres, sentinels] = await Promise.all([freePort().then(startOwnPostgres), startRedisSentinels(1)]);
    harness = await startLoadHarness({
      adminUrl: postgres.url(),
      checkUrl: () => postgres.url('faults'),
      serviceEnv: {
        // A closed port: a client that ignored the Sentinels would never be ready.
        REDIS_URL: 'redis://127.0.0.1:1',
        REDIS_SENTINELS: sentinels.sentinelsVariable,
        REDIS_SENTINEL_NAME: SENTINEL_PRIMARY_NAME,
        WORKER_LOCK_DURATION_MS: String(LOCK_DURATION_MS),
      },
    });
  }, 180_000);

  afterAll(async () => {
    await harness?.close();
    await sentinels?.stop();
    await postgres?.destroy();
  });

  it('when the Sentinels fail over, and then the new primary is killed, under load, then nothing acknowledged is lost, no request is a 500 and every process lives', async () => {
    const outcome = await harness.underLoad('sentinel', [
      {
        name: 'Redis Sentinel failover (forced)',
        inject: async () => {
          await sentinels.failover();
        },
        settleMs: SETTLE_MS,
      },
      {
        // The Sentinels notice it down after 1 s and promote the other node; it comes back as a replica.
        name: 'Redis new primary SIGKILL',
        inject: async () => {
          const killed = await sentinels.primaryPort();
          await sentinels.kill(killed);
          await waitFor(async () => (await sentinels.primaryPort()) !== killed, 30_000, 'the Sentinels to promote the replica');
          await sentinels.restart(killed);
        },
        settleMs: SETTLE_MS,
      },
    ]);

    harness.expectNothingLost(outcome);
    for (const row of outcome.rows) expect(row.recoverS).toBeLessThanOrEqual(SENTINEL_RECOVERY_PROMISE_S);
  });
});

/** docs/design.md §15.1: the address reaches the read-only standby this long before the promotion. */
const READ_ONLY_WINDOW_MS = 5_000;
/** docs/design.md §15.1: delivery resumes within 10 s of the later of the promotion and the move. */
const PROMOTION_RECOVERY_PROMISE_S = 10;

describe('a PostgreSQL failover under load (docs/design.md §15.1)', () => {
  let cluster: PrimaryWithStandby;
  let redisPort: number;
  let redis: ChildProcess;
  let harness: LoadHarness;

  beforeAll(async () => {
    cluster = await startPrimaryWithStandby({ synchronous: true });
    redisPort = await freePort();
    redis = await startRedisServer(redisPort);
    harness = await startLoadHarness({
      adminUrl: cluster.primary.url(),
      // The address: the primary until the fault, the promoted standby after it.
      checkUrl: () => cluster.url('faults'),
      serviceEnv: { REDIS_URL: `redis://127.0.0.1:${redisPort}` },
    });
  }, 180_000);

  afterAll(async () => {
    await harness?.close();
    if (redis) {
      redis.kill('SIGKILL');
      await exited(redis);
    }
    await cluster?.destroy();
  });

  it('when the address reaches the read-only standby for 5 s, then the primary stops and the standby is promoted, under load, then nothing acknowledged is lost, no request is a 500 and delivery resumes within 10 s', async () => {
    const outcome = await harness.underLoad('postgres-failover', [
      {
        name: 'PostgreSQL failover (5 s on the read-only standby, then promoted)',
        inject: async () => {
          await cluster.caughtUp();
          cluster.address.retarget(cluster.standby.port);
          await sleep(READ_ONLY_WINDOW_MS);
          await cluster.stopPrimary('fast');
          await cluster.promote();
        },
        settleMs: SETTLE_MS,
      },
    ]);

    harness.expectNothingLost(outcome);
    // The read-only window was really under load, and the apis said 503 in it.
    expect(harness.sentDuring(outcome, outcome.faults[0]).some((change) => change.status === 503)).toBe(true);
    expect(outcome.rows[0].recoverS).toBeLessThanOrEqual(PROMOTION_RECOVERY_PROMISE_S);
  });
});
