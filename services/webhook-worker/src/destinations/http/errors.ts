import type { WorkerErrorOptions } from '../../errors';

/**
 * The SSRF guard refused a target: its address (as resolved, or as written when the URL
 * holds an IP literal) is loopback, private, link-local or otherwise not public, and not in
 * WEBHOOK_PRIVATE_ALLOWLIST. The message names the host as the URL gave it, never the
 * resolved address: it is stored as the delivery's `last_error`, which users read (docs/design.md
 * §6.3). The address is in `address`, for the log.
 */
export class BlockedTargetError extends Error {
  readonly code = 'ERR_WEBHOOK_BLOCKED_TARGET';
  /** The refused address, resolved or literal; for the log only. */
  readonly address: string;
  /** The URL's host. */
  readonly host: string;

  constructor(host: string, address: string, options: WorkerErrorOptions = {}) {
    super(`Refused to deliver to ${host}: it resolves to a non-public address (SSRF guard).`, options);
    this.name = 'BlockedTargetError';
    this.address = address;
    this.host = host;
  }
}

/** The attempt ran past WEBHOOK_TIMEOUT_MS, waiting for the answer or its body. */
export class AttemptTimeoutError extends Error {
  constructor(timeoutMs: number, options: WorkerErrorOptions = {}) {
    super(`No complete answer within ${timeoutMs} ms.`, options);
    this.name = 'AttemptTimeoutError';
  }
}

/**
 * The egress proxy answered a CONNECT with `statusCode` instead of 200 (RFC 9110 §9.3.6): no
 * tunnel, so nothing reached the target and what the proxy sent is its own, not the endpoint's
 * (docs/design.md §14.3).
 */
export class EgressProxyAnswerError extends Error {
  readonly code = 'ERR_WEBHOOK_EGRESS_PROXY_ANSWER';
  readonly statusCode: number;

  constructor(statusCode: number, options: WorkerErrorOptions = {}) {
    super(`The egress proxy answered ${statusCode} to CONNECT.`, options);
    this.name = 'EgressProxyAnswerError';
    this.statusCode = statusCode;
  }
}
