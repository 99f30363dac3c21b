import { AttemptOutcome, createRetryPolicy, parseRetryAfter } from '../../services/webhook-worker/src/retry-policy';
import { isNonPublicAddress } from '../../services/webhook-worker/src/destinations/http/ssrf-guard';

const outcome = (overrides: Partial<AttemptOutcome> = {}): AttemptOutcome => ({
  statusCode: 503,
  timedOut: false,
  retryAfterMs: null,
  blocked: false,
  ...overrides,
});

describe('retry policy', () => {
  const schedule = [5, 300, 1800, 7200, 18000, 36000, 36000];

  it('When an attempt fails, then the delay is the scheduled one within ±20% jitter', () => {
    expect(createRetryPolicy(schedule, () => 0).delayMs(1, outcome())).toBe(4_000);
    expect(createRetryPolicy(schedule, () => 0.5).delayMs(1, outcome())).toBe(5_000);
    expect(createRetryPolicy(schedule, () => 0.999999).delayMs(2, outcome())).toBe(360_000);
  });

  it('When the schedule has 7 entries, then there are 8 attempts and the 8th failure is final', () => {
    const policy = createRetryPolicy(schedule, () => 0.5);
    expect(policy.maxAttempts).toBe(8);
    expect(policy.decide(7, outcome())).toEqual({ kind: 'retry', delayMs: 36_000_000 });
    expect(policy.decide(8, outcome())).toEqual({ kind: 'failed', disableEndpoint: false });
  });

  it('When Retry-After is given, then it is clamped to [delay, 2 x delay]', () => {
    const policy = createRetryPolicy(schedule, () => 0.5);
    expect(policy.delayMs(1, outcome({ retryAfterMs: 7_000 }))).toBe(7_000);
    expect(policy.delayMs(1, outcome({ retryAfterMs: 1_000 }))).toBe(5_000);
    expect(policy.delayMs(1, outcome({ retryAfterMs: 3_600_000 }))).toBe(10_000);
  });

  it('When the attempt timed out or got 429, then the retry waits at least 60 s', () => {
    const policy = createRetryPolicy(schedule, () => 0.5);
    expect(policy.delayMs(1, outcome({ statusCode: null, timedOut: true }))).toBe(60_000);
    expect(policy.delayMs(1, outcome({ statusCode: 429, retryAfterMs: 1_000 }))).toBe(60_000);
    expect(policy.delayMs(2, outcome({ statusCode: 429 }))).toBe(300_000);
  });

  it('When the answer is 2xx, 410, a refused target or a one-shot redelivery, then no retry follows', () => {
    const policy = createRetryPolicy(schedule);
    expect(policy.decide(1, outcome({ statusCode: 204 }))).toEqual({ kind: 'succeeded' });
    expect(policy.decide(1, outcome({ statusCode: 410 }))).toEqual({ kind: 'failed', disableEndpoint: true });
    expect(policy.decide(1, outcome({ statusCode: null, blocked: true }))).toEqual({ kind: 'failed', disableEndpoint: false });
    expect(policy.decide(1, outcome(), { oneShot: true })).toEqual({ kind: 'failed', disableEndpoint: false });
    expect(policy.decide(1, outcome({ statusCode: 301 })).kind).toBe('retry');
  });

  it('When Retry-After holds seconds or an HTTP date, then both parse to milliseconds from now', () => {
    const now = Date.parse('2026-11-21T10:00:00Z');
    expect(parseRetryAfter('120', now)).toBe(120_000);
    expect(parseRetryAfter('Sat, 21 Nov 2026 10:00:30 GMT', now)).toBe(30_000);
    expect(parseRetryAfter('Sat, 21 Nov 2026 09:00:00 GMT', now)).toBe(0);
    expect(parseRetryAfter('soon', now)).toBeNull();
    expect(parseRetryAfter(undefined, now)).toBeNull();
  });
});

describe('SSRF guard address check', () => {
  it.each([
    ['127.0.0.1', true],
    ['10.1.2.3', true],
    ['172.20.0.1', true],
    ['192.168.1.1', true],
    ['169.254.169.254', true],
    ['100.64.0.1', true],
    ['0.0.0.0', true],
    ['::1', true],
    ['fe80::1', true],
    ['fd00::1', true],
    ['::ffff:127.0.0.1', true],
    ['93.184.215.14', false],
    ['2606:4700::1111', false],
  ])('When the address is %s, then non-public is %s', (address, expected) => {
    expect(isNonPublicAddress(address)).toBe(expected);
  });
});
