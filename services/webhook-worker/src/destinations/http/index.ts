import type { Logger } from 'pino';
import { traceAttempts } from '../../tracing';
import { between, outageWaitMs } from '../../waits';
import type { Destination, DeliveryOutcome, DestinationOptions } from '../destination';
import { createAuthorizedSend } from './authorized-send';
import { createHttpSender, type SendResult } from './http-sender';
import { createOAuth2Tokens } from './oauth2-tokens';

/**
 * The egress proxy refusing the worker's credentials (407) is the operator's outage: the
 * delivery waits as long as the outage has lasted so far, at least 1 s and at most 60 s, and
 * the error is logged at most this often per process (docs/design.md §14.3).
 */
const PROXY_BACKOFF_MS = { min: 1_000, max: 60_000 };
const PROXY_OUTAGE_LOG_EVERY_MS = 30_000;

/**
 * The `http` destination (docs/design.md §6.3, "Destinations"): one keep-alive HTTP client for
 * every attempt (http-sender.ts: the SSRF guard, the egress proxy, no redirects), with the
 * endpoint's credentials (authorized-send.ts: its OAuth2 token, oauth2-tokens.ts, and its client
 * certificate). An answer is an outcome: 2xx succeeded, anything else failed.
 */
export function createHttpDestination(options: DestinationOptions): Destination {
  const { config, random } = options;
  const sender = traceAttempts(
    createHttpSender({
      timeoutMs: config.webhookTimeoutMs,
      blockPrivate: config.webhookBlockPrivate,
      privateAllowlist: config.webhookPrivateAllowlist,
      logger: options.logger,
      maxSockets: config.workerConcurrency,
      proxyUrl: config.webhookProxyUrl,
      noProxy: config.webhookNoProxy,
    }),
  );
  const authorizedSend = createAuthorizedSend({ sender, tokens: createOAuth2Tokens({ sender, timeoutMs: config.webhookTimeoutMs }), timeoutMs: config.webhookTimeoutMs });
  let proxyRefusedSince: number | undefined;
  let proxyOutageLoggedAt = 0;

  /** The egress proxy refused the worker's credentials (407): how long to wait, said loudly. */
  function waitForProxy(log: Logger): number {
    const now = Date.now();
    proxyRefusedSince ??= now;
    const waitMs = outageWaitMs(now - proxyRefusedSince, PROXY_BACKOFF_MS) * between(random, [0.8, 1.2]);
    const fields = { refusedForMs: now - proxyRefusedSince, delayMs: Math.round(waitMs) };
    const message = 'egress proxy answered 407: WEBHOOK_PROXY_URL credentials refused; deliveries wait without using attempts';
    if (now - proxyOutageLoggedAt >= PROXY_OUTAGE_LOG_EVERY_MS) {
      proxyOutageLoggedAt = now;
      log.error(fields, message);
    } else log.debug(fields, message);
    return waitMs;
  }

  return {
    async send(message, { admitAnother, log }) {
      const { endpoint } = message;
      const request = { url: message.url, method: message.method, body: message.body, headers: message.headers };
      const credentials = { endpointId: endpoint.id, url: message.url, auth: endpoint.auth, clientCertificate: endpoint.clientCertificate };
      const result = await authorizedSend(credentials, request, admitAnother, log);
      if (result.proxyUnauthorized) return { kind: 'unsent', waitMs: waitForProxy(log) };
      proxyRefusedSince = undefined;
      return outcomeOf(result);
    },
    close: () => sender.close(),
  };
}

/**
 * An HTTP result as an outcome. For the circuit (docs/design.md §6.4) a timeout, a connection
 * error, 5xx and 429 are failures, and so is a token that could not be had (docs/design.md §14.4,
 * `oauth2 token: ...`, no status); any other answer, or a target the SSRF guard or the egress
 * proxy's policy refused, says nothing about the endpoint's health. A refused target is not
 * worth a retry.
 */
export function outcomeOf(result: SendResult): DeliveryOutcome {
  const { statusCode: status, response: excerpt, durationMs } = result;
  if (status !== null && status >= 200 && status < 300) return { kind: 'succeeded', status, excerpt, durationMs };
  return {
    kind: 'failed',
    error: result.error,
    status,
    excerpt,
    durationMs,
    retryable: !result.blocked,
    retryAfterMs: result.retryAfterMs,
    overloaded: result.timedOut || status === 429,
    unhealthy: !result.blocked && (status === null || status >= 500 || status === 429),
  };
}
