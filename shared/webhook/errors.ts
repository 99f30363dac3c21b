import type { AxiosResponse } from 'axios';

/** Options every webhook error accepts: the lower-level error that caused it. */
export interface WebhookErrorOptions {
  cause?: unknown;
}

/**
 * A signature could not be made or did not verify: bad, missing or stale signature, an
 * envelope without the signable flag, a refused event, or an empty or invalid payload when
 * signing. Luminova's `EncryptionException`, raised by `unpack()` and `signPayload()`.
 */
export class EncryptionError extends Error {
  constructor(message: string, options: WebhookErrorOptions = {}) {
    super(message, options);
    this.name = 'EncryptionError';
  }
}

/**
 * The helper was used in a way that cannot work: `unpack()` before `listen()`, an unsupported
 * HMAC algorithm, an unknown `send()` field. Luminova's `LogicException`.
 */
export class LogicError extends Error {
  constructor(message: string, options: WebhookErrorOptions = {}) {
    super(message, options);
    this.name = 'LogicError';
  }
}

/** Options of a {@link RequestError}: what the server answered, when it answered at all. */
export interface RequestErrorOptions extends WebhookErrorOptions {
  /** HTTP status of the answer; null when no answer arrived (refused, reset, timed out). */
  status?: number | null;
  /** The full axios response; null when no answer arrived. */
  response?: AxiosResponse | null;
}

/**
 * Sending a webhook failed: a transport error or a non-2xx answer. Luminova's
 * `RequestException`, raised by `send()`.
 */
export class RequestError extends Error {
  /** HTTP status of the answer, or null when the request got no answer. */
  readonly status: number | null;
  /** The axios response (status, headers, data), or null when the request got no answer. */
  readonly response: AxiosResponse | null;

  constructor(message: string, options: RequestErrorOptions = {}) {
    super(message, { cause: options.cause });
    this.name = 'RequestError';
    this.status = options.status ?? null;
    this.response = options.response ?? null;
  }
}
