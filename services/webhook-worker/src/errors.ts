/** Options every worker error accepts: the lower-level error that caused it. */
export interface WorkerErrorOptions {
  cause?: unknown;
}

/**
 * The SSRF guard refused a target: its address (as resolved, or as written when the URL
 * holds an IP literal) is loopback, private, link-local or otherwise not public.
 */
export class BlockedTargetError extends Error {
  readonly code = 'ERR_WEBHOOK_BLOCKED_TARGET';
  readonly address: string;

  constructor(host: string, address: string, options: WorkerErrorOptions = {}) {
    super(`Refused to deliver to ${host}: it resolves to the non-public address ${address}.`, options);
    this.name = 'BlockedTargetError';
    this.address = address;
  }
}

/** The attempt ran past WEBHOOK_TIMEOUT_MS, waiting for the answer or its body. */
export class AttemptTimeoutError extends Error {
  constructor(timeoutMs: number, options: WorkerErrorOptions = {}) {
    super(`No complete answer within ${timeoutMs} ms.`, options);
    this.name = 'AttemptTimeoutError';
  }
}
