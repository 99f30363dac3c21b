import Redis from 'ioredis';
import { createEndpointRateLimiter, EndpointRateLimiter, gateKeys } from '../../shared/endpoint-gate';
import { createTestEnvironment, TestEnvironment } from '../support/environment';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** docs/design.md §14.1's `rate_limit_per_s` as attempts leave: the start bound every worker shares through Redis. */
describe('endpoint rate limit: starting an attempt', () => {
  let env: TestEnvironment;
  let redis: Redis;
  let limiter: EndpointRateLimiter;
  let gate = 0;
  /** A gate key no other test has used, so each starts with an empty schedule. */
  const freshGate = () => `e:${(gate += 1)}`;

  beforeAll(async () => {
    env = await createTestEnvironment();
    redis = new Redis(env.redisUrl);
    limiter = createEndpointRateLimiter(redis, env.redisPrefix);
  });

  afterAll(async () => {
    await redis.quit();
    await env.cleanup();
  });

  it('when three attempts start at once at limit 50, then two go and the third waits for its place 20 ms apart, not for the next second', async () => {
    const gateKey = freshGate();
    // Sent together, so Redis runs them back to back whatever the load on this machine.
    const [a, b, c] = await Promise.all(['a', 'b', 'c'].map((token) => limiter.start(gateKey, token, 50)));
    expect([a, b]).toEqual([0, 0]);
    expect(c).toBeGreaterThanOrEqual(1);
    expect(c).toBeLessThanOrEqual(20);
  });

  it('when the limit is 5 a second, then there is no burst: a second attempt waits about 200 ms', async () => {
    const gateKey = freshGate();
    const [first, wait] = await Promise.all(['a', 'b'].map((token) => limiter.start(gateKey, token, 5)));
    expect(first).toBe(0);
    expect(wait).toBeGreaterThan(150);
    expect(wait).toBeLessThanOrEqual(200);
  });

  it('when four workers start attempts as soon as they may for a second at limit 50, then no second holds more than 50 and the starts are evenly spaced', async () => {
    const gateKey = freshGate();
    const until = Date.now() + 1_000;
    let token = 0;
    const worker = async () => {
      while (Date.now() < until) {
        const wait = await limiter.start(gateKey, `t${(token += 1)}`, 50);
        if (wait > 0) await sleep(wait);
      }
    };
    await Promise.all([worker(), worker(), worker(), worker()]);

    // The log of starts holds every start of that second, with Redis's own time of each.
    const log = await redis.zrange(gateKeys(env.redisPrefix, gateKey).starts, 0, -1, 'WITHSCORES');
    const starts = log.filter((_, i) => i % 2 === 1).map(Number);
    expect(starts.length).toBeGreaterThanOrEqual(40);
    expect(starts.length).toBeLessThanOrEqual(52);
    // The sliding log: no 51 starts within one second (a loop running a few ms over may start a 51st after it).
    for (let i = 50; i < starts.length; i += 1) expect(starts[i] - starts[i - 50]).toBeGreaterThanOrEqual(1_000);
    // GCRA at 20 ms with 25 ms of tolerance: no three starts within 15 ms, at any point.
    for (let i = 2; i < starts.length; i += 1) expect(starts[i] - starts[i - 2]).toBeGreaterThanOrEqual(15);
  });
});
