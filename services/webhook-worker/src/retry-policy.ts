/** What one HTTP attempt came to, as far as the retry policy cares. */
export interface AttemptOutcome {
  /** HTTP status of the answer; null when none arrived. */
  statusCode: number | null;
  /** The attempt ran past the per-attempt timeout. */
  timedOut: boolean;
  /** The answer's `Retry-After`, converted to milliseconds from now; null when absent or invalid. */
  retryAfterMs: number | null;
  /** The SSRF guard refused the target; retrying cannot help. */
  blocked: boolean;
}

/** What to do after an attempt. */
export type RetryDecision =
  | { kind: 'succeeded' }
  | { kind: 'retry'; delayMs: number }
  | { kind: 'failed'; disableEndpoint: boolean };

export interface RetryPolicy {
  /** Attempts in all: the schedule's length plus the first attempt. */
  readonly maxAttempts: number;
  /**
   * Decides after attempt `attemptNumber` (1-based). Success is any 2xx. 410 Gone fails the
   * delivery and disables its endpoint; a blocked target and a one-shot redelivery fail at
   * once; the last scheduled attempt fails; anything else retries after {@link delayMs}.
   */
  decide(attemptNumber: number, outcome: AttemptOutcome, options?: { oneShot?: boolean }): RetryDecision;
  /**
   * Delay before the attempt after `attemptNumber`, milliseconds (docs/design.md §6.3): the schedule's
   * entry ±20% jitter; `Retry-After` honoured but clamped to [delay, 2 x delay]; at least
   * 60 s after a timeout or a 429.
   */
  delayMs(attemptNumber: number, outcome: AttemptOutcome): number;
}

/** Floor after a timeout or 429: the receiver is overloaded, so back off (docs/design.md §6.3). */
const OVERLOAD_FLOOR_MS = 60_000;
const JITTER = 0.2;

/**
 * The retry schedule as data.
 *
 * @param scheduleSeconds - seconds to wait before each retry (WEBHOOK_RETRY_SCHEDULE)
 * @param random - uniform in [0, 1); tests pass a fixed one to pin the jitter
 */
export function createRetryPolicy(scheduleSeconds: readonly number[], random: () => number = Math.random): RetryPolicy {
  const maxAttempts = scheduleSeconds.length + 1;

  function delayMs(attemptNumber: number, outcome: AttemptOutcome): number {
    const base = scheduleSeconds[Math.min(attemptNumber, scheduleSeconds.length) - 1] * 1000;
    const delay = base * (1 - JITTER + 2 * JITTER * random());
    let chosen = outcome.retryAfterMs === null ? delay : Math.min(Math.max(outcome.retryAfterMs, delay), 2 * delay);
    if (outcome.timedOut || outcome.statusCode === 429) chosen = Math.max(chosen, OVERLOAD_FLOOR_MS);
    return Math.round(chosen);
  }

  return {
    maxAttempts,
    delayMs,
    decide(attemptNumber, outcome, options = {}) {
      const { statusCode } = outcome;
      if (statusCode !== null && statusCode >= 200 && statusCode < 300) return { kind: 'succeeded' };
      if (statusCode === 410) return { kind: 'failed', disableEndpoint: true };
      if (outcome.blocked || options.oneShot || attemptNumber >= maxAttempts) return { kind: 'failed', disableEndpoint: false };
      return { kind: 'retry', delayMs: delayMs(attemptNumber, outcome) };
    },
  };
}

/**
 * Parses `Retry-After` (RFC 9110 §10.2.3): delay-seconds or an HTTP-date.
 *
 * @param now - the current time, ms since the epoch
 * @returns milliseconds from now (never negative), or null when absent or unparseable
 */
export function parseRetryAfter(value: string | undefined, now: number = Date.now()): number | null {
  if (value === undefined) return null;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const date = Date.parse(trimmed);
  return Number.isNaN(date) ? null : Math.max(0, date - now);
}
