import Redis from 'ioredis';
import { CIRCUIT_OPEN_BASE_MS, DeliveryGate, createDeliveryGate, gateKeyOf, listOpenCircuits, readCircuitState } from '../../shared/endpoint-gate';
import { TestEnvironment, createTestEnvironment } from '../support/environment';

describe('delivery gate: per-endpoint cap and circuit breaker in Redis', () => {
  let env: TestEnvironment;
  let redis: Redis;
  let gate: DeliveryGate;
  let endpoint = 0;

  beforeAll(async () => {
    env = await createTestEnvironment({}, 'worker');
    redis = new Redis(env.redisUrl);
    gate = createDeliveryGate(redis, { prefix: env.redisPrefix, concurrency: 2, breakerFailures: 3, leaseTtlMs: 300 });
  });

  beforeEach(() => {
    endpoint += 1;
  });

  afterAll(async () => {
    await redis.quit();
    await env.cleanup();
  });

  /** Moves the circuit's reopening time into the past, as if the open period had elapsed. */
  async function elapseOpening(gateKey: string): Promise<void> {
    await redis.hset(`${env.redisPrefix}:webhooks:circuit:${gateKey}`, 'until', Date.now() - 1);
  }

  it('When more attempts than the cap ask for one endpoint, then the extra one waits, and a lease whose holder died expires', async () => {
    const key = `e:${endpoint}`;

    expect(await gate.acquire(key, 'job-a')).toEqual({ granted: true, probe: false, rateLimitPerS: null });
    expect(await gate.acquire(key, 'job-b')).toEqual({ granted: true, probe: false, rateLimitPerS: null });
    expect(await gate.acquire(key, 'job-c')).toMatchObject({ granted: false, reason: 'cap' });
    expect(await gate.acquire(`e:${endpoint + 1000}`, 'job-c')).toMatchObject({ granted: true });
    await gate.release(key, 'job-a', 'neutral');
    expect(await gate.acquire(key, 'job-c')).toMatchObject({ granted: true });
    // job-b's worker "dies": its lease ends with the TTL (300 ms), not never.
    await new Promise((resolve) => setTimeout(resolve, 350));
    expect(await gate.acquire(key, 'job-d')).toMatchObject({ granted: true });
    expect(await gate.acquire(key, 'job-e')).toMatchObject({ granted: true });
  });

  it('When failures reach the threshold, then the circuit opens for 30 s and refuses attempts until it reopens', async () => {
    const key = `e:${endpoint}`;
    for (const token of ['a', 'b']) {
      await gate.acquire(key, token);
      expect((await gate.release(key, token, 'failure')).change).toBe('none');
    }
    // A success in between resets the count: failures must be consecutive.
    await gate.acquire(key, 'ok');
    await gate.release(key, 'ok', 'success');
    for (const token of ['c', 'd']) {
      await gate.acquire(key, token);
      expect((await gate.release(key, token, 'failure')).change).toBe('none');
    }
    expect(await readCircuitState(redis, env.redisPrefix, endpoint)).toBe('closed');
    await gate.acquire(key, 'e');

    expect((await gate.release(key, 'e', 'failure')).change).toBe('opened');

    const refused = await gate.acquire(key, 'f');
    expect(refused).toMatchObject({ granted: false, reason: 'open' });
    expect((refused as { waitMs: number }).waitMs).toBeGreaterThan(CIRCUIT_OPEN_BASE_MS - 1_000);
    expect((refused as { waitMs: number }).waitMs).toBeLessThanOrEqual(CIRCUIT_OPEN_BASE_MS);
    expect(await readCircuitState(redis, env.redisPrefix, endpoint)).toBe('open');
    expect(await listOpenCircuits(redis, env.redisPrefix)).toContainEqual({ gateKey: key, state: 'open' });
  });

  it('When the open period ends, then exactly one probe goes; its failure reopens for twice as long, its success closes', async () => {
    const key = `e:${endpoint}`;
    for (const token of ['a', 'b', 'c']) {
      await gate.acquire(key, token);
      await gate.release(key, token, 'failure');
    }
    await elapseOpening(key);
    expect(await readCircuitState(redis, env.redisPrefix, endpoint)).toBe('half_open');

    expect(await gate.acquire(key, 'probe-1')).toEqual({ granted: true, probe: true, rateLimitPerS: null });
    expect(await gate.acquire(key, 'other')).toMatchObject({ granted: false, reason: 'probing' });
    expect((await gate.release(key, 'probe-1', 'failure')).change).toBe('opened');
    const second = await gate.acquire(key, 'other');
    expect(second).toMatchObject({ granted: false, reason: 'open' });
    expect((second as { waitMs: number }).waitMs).toBeGreaterThan(2 * CIRCUIT_OPEN_BASE_MS - 1_000);

    await elapseOpening(key);
    expect(await gate.acquire(key, 'probe-2')).toEqual({ granted: true, probe: true, rateLimitPerS: null });
    expect((await gate.release(key, 'probe-2', 'success')).change).toBe('closed');
    expect(await readCircuitState(redis, env.redisPrefix, endpoint)).toBe('closed');
    expect(await gate.acquire(key, 'after')).toEqual({ granted: true, probe: false, rateLimitPerS: null });
    expect((await listOpenCircuits(redis, env.redisPrefix)).map((circuit) => circuit.gateKey)).not.toContain(key);
  });

  it('When the probe holder dies, then its lease expiry lets another attempt probe', async () => {
    const key = `e:${endpoint}`;
    for (const token of ['a', 'b', 'c']) {
      await gate.acquire(key, token);
      await gate.release(key, token, 'failure');
    }
    await elapseOpening(key);
    expect(await gate.acquire(key, 'dies')).toMatchObject({ granted: true, probe: true });

    await new Promise((resolve) => setTimeout(resolve, 350));

    expect(await gate.acquire(key, 'next')).toEqual({ granted: true, probe: true, rateLimitPerS: null });
  });

  it('When many attempts of one process ask and report at once, then the cap and the threshold hold as if they came one by one', async () => {
    const key = `e:${endpoint}`;
    const other = `e:${endpoint + 1000}`;

    const decisions = await Promise.all(['a', 'b', 'c', 'd', 'e'].map((token) => gate.acquire(token === 'e' ? other : key, `job-${token}`)));

    expect(decisions.map((decision) => decision.granted)).toEqual([true, true, false, false, true]);
    const changes = await Promise.all([
      gate.release(key, 'job-a', 'failure'),
      gate.release(key, 'job-b', 'failure'),
      gate.release(other, 'job-e', 'failure'),
      gate.release(key, 'job-x', 'failure'),
      gate.release(key, 'job-y', 'failure'),
    ]);
    // The third failure of `key` opens its circuit, once; the fourth finds it open already.
    expect(changes.map((release) => release.change)).toEqual(['none', 'none', 'none', 'opened', 'none']);
    expect(await readCircuitState(redis, env.redisPrefix, endpoint)).toBe('open');
    expect(await readCircuitState(redis, env.redisPrefix, endpoint + 1000)).toBe('closed');
  });

  it('When jobs are refused for the cap, then they are parked with the gate and each returned lease wakes the oldest one', async () => {
    const key = `e:${endpoint}`;
    await gate.acquire(key, 'job-a');
    await gate.acquire(key, 'job-b');
    expect(await gate.acquire(key, 'job-c')).toMatchObject({ granted: false, reason: 'cap' });
    expect(await gate.acquire(key, 'job-d')).toMatchObject({ granted: false, reason: 'cap' });
    expect([await gate.isParked(key, 'job-c'), await gate.isParked(key, 'job-d')]).toEqual([true, true]);

    expect(await gate.release(key, 'job-a', 'success')).toEqual({ change: 'none', woken: ['job-c'] });
    expect([await gate.isParked(key, 'job-c'), await gate.isParked(key, 'job-d')]).toEqual([false, true]);
    // The woken job takes the free lease; the other stays parked until the next release.
    expect(await gate.acquire(key, 'job-c')).toMatchObject({ granted: true });
    expect(await gate.release(key, 'job-b', 'neutral')).toEqual({ change: 'none', woken: ['job-d'] });
    expect(await gate.release(key, 'job-c', 'neutral')).toEqual({ change: 'none', woken: [] });
  });

  it('When the release that opens the circuit frees a lease, then it wakes no parked job, and the successful probe wakes them', async () => {
    const key = `e:${endpoint}`;
    await gate.acquire(key, 'job-a');
    await gate.acquire(key, 'job-b');
    await gate.acquire(key, 'job-c');
    expect(await gate.release(key, 'job-a', 'failure')).toEqual({ change: 'none', woken: ['job-c'] });
    await gate.acquire(key, 'job-c');
    expect(await gate.release(key, 'job-b', 'failure')).toEqual({ change: 'none', woken: [] });
    await gate.acquire(key, 'job-d');
    expect(await gate.acquire(key, 'job-f')).toMatchObject({ granted: false, reason: 'cap' });
    // The third failure opens the circuit: job-f stays parked rather than run into it.
    expect(await gate.release(key, 'job-c', 'failure')).toEqual({ change: 'opened', woken: [] });
    expect(await gate.isParked(key, 'job-f')).toBe(true);

    await elapseOpening(key);
    expect(await gate.acquire(key, 'probe')).toEqual({ granted: true, probe: true, rateLimitPerS: null });
    // Parked behind the probe: should it fail, the circuit reopens for twice the first opening.
    expect(await gate.acquire(key, 'job-g')).toMatchObject({ granted: false, reason: 'probing', failedProbeOpeningMs: 2 * CIRCUIT_OPEN_BASE_MS });
    // Closed again, with job-d's lease still held: one free lease, the oldest parked job.
    expect(await gate.release(key, 'probe', 'success')).toEqual({ change: 'closed', woken: ['job-f'] });
    expect(await gate.isParked(key, 'job-g')).toBe(true);
  });

  it('When the gate does not know an endpoint\'s ordering, then a job that has not claimed is sent to claim first, and a claim tells it', async () => {
    const key = `e:${endpoint}`;

    expect(await gate.ask(key, 'job-a')).toEqual({ granted: false, reason: 'line' });
    expect(await gate.acquire(key, 'job-a', { place: 'unordered' })).toEqual({ granted: true, probe: false, rateLimitPerS: null });

    expect(await gate.ask(key, 'job-b')).toEqual({ granted: true, probe: false, rateLimitPerS: null });
  });

  it('When an endpoint is FIFO, then only its line\'s head asks the gate: the deliveries behind take no lease, no parking and no probe', async () => {
    const key = `e:${endpoint}`;
    expect(await gate.acquire(key, 'msg-1', { place: 'head' })).toMatchObject({ granted: true });
    await gate.acquire(key, 'other-worker-lease', { place: 'aside' });

    // At the cap: a delivery behind the head is neither refused for the cap nor parked with the gate.
    expect(await gate.ask(key, 'msg-3')).toEqual({ granted: false, reason: 'line' });
    expect(await gate.isParked(key, 'msg-3')).toBe(false);
    // The head's end names the next head, which then asks like one.
    await gate.release(key, 'msg-1', 'failure', 'msg-2');
    await gate.release(key, 'other-worker-lease', 'failure');
    await gate.acquire(key, 'redelivery', { place: 'aside' });
    expect((await gate.release(key, 'redelivery', 'failure')).change).toBe('opened');
    await elapseOpening(key);

    // Half-open: the probe is the head's, never a delivery behind it.
    expect(await gate.ask(key, 'msg-3')).toEqual({ granted: false, reason: 'line' });
    expect(await gate.ask(key, 'msg-2')).toEqual({ granted: true, probe: true, rateLimitPerS: null });
  });

  it('When deliveries have no endpoint, then their gate is the URL origin', () => {
    expect(gateKeyOf({ endpointId: 7, url: 'https://a.example/x' })).toBe('e:7');
    expect(gateKeyOf({ endpointId: null, url: 'https://a.example:443/x?y' })).toBe('o:https://a.example');
    expect(gateKeyOf({ endpointId: null, url: 'http://127.0.0.1:8080/hook' })).toBe('o:http://127.0.0.1:8080');
  });
});
