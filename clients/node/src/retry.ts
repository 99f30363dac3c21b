/** How a failed request is retried. */
export interface RetryOptions {
  /** Retries after the first try; default 3. 0 turns retries off. */
  maxRetries?: number;
  /** The first backoff, ms; each next one doubles, with ±25% jitter. Default 500. */
  baseDelayMs?: number;
  /** The longest wait between two tries, ms, `Retry-After` included. Default 8000. */
  maxDelayMs?: number;
}

const IDEMPOTENT_METHODS = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE', 'PATCH']);

/**
 * Wraps `fetch` with the retries of Stripe's and Svix's clients: a request is tried again after
 * a 429 or a 409 that names a `Retry-After` (the api refused it before doing anything, or the
 * same Idempotency-Key is still running), and, when it is safe to run twice (an idempotent
 * method, or a request carrying an Idempotency-Key, which the api answers once), after a network
 * error or a 5xx. It waits `Retry-After` when the api gives one (RFC 9110 §10.2.3: seconds or an
 * HTTP date), else an exponential backoff with jitter. The same request, its headers included,
 * is sent each time, so a retried send keeps its Idempotency-Key.
 *
 * @returns a fetch that resolves with the last answer, or rejects with the last network error
 */
export function fetchWithRetries(baseFetch: typeof fetch, options: RetryOptions = {}): typeof fetch {
  const maxRetries = options.maxRetries ?? 3;
  const baseDelayMs = options.baseDelayMs ?? 500;
  const maxDelayMs = options.maxDelayMs ?? 8_000;

  return async function fetchRetrying(input: Request | string | URL, init?: RequestInit): Promise<Response> {
    const request = new Request(input, init);
    const safe = IDEMPOTENT_METHODS.has(request.method) || request.headers.has('idempotency-key');
    for (let retry = 0; ; retry += 1) {
      const backoff = Math.min(maxDelayMs, baseDelayMs * 2 ** retry * (0.75 + Math.random() / 2));
      let response: Response;
      try {
        response = await baseFetch(request.clone());
      } catch (error) {
        if (!safe || retry >= maxRetries) throw error;
        await sleep(backoff);
        continue;
      }
      const retryAfter = retryAfterMs(response.headers.get('retry-after'));
      const refused = response.status === 429 || (response.status === 409 && retryAfter !== null);
      const failed = response.status >= 500 && safe;
      if (retry >= maxRetries || !(refused || failed)) return response;
      await response.body?.cancel();
      await sleep(Math.min(maxDelayMs, retryAfter ?? backoff));
    }
  };
}

function retryAfterMs(value: string | null): number | null {
  if (value === null) return null;
  if (/^\d+$/.test(value.trim())) return Number(value) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, at - Date.now());
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
