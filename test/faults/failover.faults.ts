import { startOwnPostgres, type OwnPostgres } from '../support/own-postgres';
import { freePort, waitFor } from '../support/processes';
import { SENTINEL_PRIMARY_NAME, startRedisSentinels, type RedisSentinelSet } from '../support/redis-sentinel';
import { SETTLE_MS, startLoadHarness, type LoadHarness } from './support/under-load';

/**
 * DESIGN §15 (revision 4): failovers under the same load as test/faults/faults-under-load.faults.ts.
 * Redis is a primary with one replica and three Sentinels (down-after-milliseconds 1000): a
 * forced `SENTINEL FAILOVER`, then the new primary killed outright.
 */

/** DESIGN §13: every acknowledged event arrives within 10 s of the promotion + the job lock (the default 30 s). */
const SENTINEL_RECOVERY_PROMISE_S = 10 + 30;

describe('failovers under load (DESIGN §15, revision 4)', () => {
  let postgres: OwnPostgres;
  let sentinels: RedisSentinelSet;
  let harness: LoadHarness;

  beforeAll(async () => {
    [postgres, sentinels] = await Promise.all([freePort().then(startOwnPostgres), startRedisSentinels(1)]);
    harness = await startLoadHarness({
      adminUrl: postgres.url(),
      checkUrl: () => postgres.url('faults'),
      redisEnv: {
        // A closed port: a client that ignored the Sentinels would never be ready.
        REDIS_URL: 'redis://127.0.0.1:1',
        REDIS_SENTINELS: sentinels.sentinelsVariable,
        REDIS_SENTINEL_NAME: SENTINEL_PRIMARY_NAME,
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
