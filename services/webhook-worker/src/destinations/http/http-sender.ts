import http from 'node:http';
import https from 'node:https';
import { performance } from 'node:perf_hooks';
import type { Readable } from 'node:stream';
import axios, { AxiosError } from 'axios';
import axiosRetry from 'axios-retry';
import { errorChain } from '../../../../../shared/db/errors';
import { shownUrl } from '../../../../../shared/http/url-display';
import { ClientCertificate, createClientCertificateAgents } from './client-certificate-agents';
import { EgressProxy, createEgressProxy } from './egress-proxy';
import { AttemptTimeoutError, BlockedTargetError, EgressProxyAnswerError } from './errors';
import { AttemptOutcome, parseRetryAfter } from '../../retry-policy';
import { createSsrfGuard } from './ssrf-guard';

/** Bytes of the answer kept in webhook_attempts (docs/design.md §3). */
export const RESPONSE_EXCERPT_BYTES = 2048;

/** One signed request, ready to go. */
export interface OutgoingRequest {
  url: string;
  method: string;
  /** The exact bytes that were signed. */
  body: Buffer;
  headers: Record<string, string>;
  /** Presented for mutual TLS to an https target, from a pool of its own; default none. */
  clientCertificate?: ClientCertificate;
  /**
   * When the whole attempt must be over (`performance.now()` ms), for an attempt of several
   * requests (a token, then the delivery); default WEBHOOK_TIMEOUT_MS from now.
   */
  deadline?: number;
  /** Bytes of the answer kept in `response`; default {@link RESPONSE_EXCERPT_BYTES}. */
  excerptBytes?: number;
}

/** What an attempt came to: the policy's view plus what webhook_attempts records. */
export interface SendResult extends AttemptOutcome {
  /**
   * Why no usable answer arrived (transport error, timeout, refused target); null otherwise.
   * Users read it (the delivery's last_error), so it names the URL's host, never the address
   * that host resolved to.
   */
  error: string | null;
  durationMs: number;
  /** The first 2 KB of the endpoint's answer, as UTF-8 text; never the egress proxy's. */
  response: string | null;
  /**
   * The egress proxy refused the worker's own credentials (407): the operator's outage, not the
   * endpoint's; nothing reached the endpoint and the attempt does not count (docs/design.md §14.3).
   */
  proxyUnauthorized: boolean;
}

export interface HttpSenderOptions {
  /** Whole-attempt bound, connection to last body byte, ms (WEBHOOK_TIMEOUT_MS). */
  timeoutMs: number;
  /** Apply the SSRF guard (WEBHOOK_BLOCK_PRIVATE). */
  blockPrivate: boolean;
  /**
   * Hostnames and CIDRs the guard lets through (WEBHOOK_PRIVATE_ALLOWLIST,
   * `config.webhookPrivateAllowlist`); default none.
   */
  privateAllowlist?: readonly string[];
  /** Where a refused target's resolved address is logged (it never reaches `error`); default none. */
  logger?: { warn(details: object, message: string): void };
  /** Sockets per target origin; the worker's concurrency is a sensible value. */
  maxSockets: number;
  /**
   * The operator's forward proxy, `http://[user:password@]host:port` (WEBHOOK_PROXY_URL,
   * `config.webhookProxyUrl`); default none: every target is connected to directly.
   */
  proxyUrl?: string;
  /** Targets sent directly despite the proxy (WEBHOOK_NO_PROXY, `config.webhookNoProxy`); default none. */
  noProxy?: readonly string[];
}

export interface HttpSender {
  /** Sends once (plus axios-retry's quick transport retries); never throws. */
  send(request: OutgoingRequest): Promise<SendResult>;
  /** Drops the pooled keep-alive sockets, the proxy's and the client certificates' included. */
  close(): void;
}

/** The TCP keep-alive delay axios sets on each request's socket (its http adapter), ms. */
const TCP_KEEPALIVE_DELAY_MS = 60_000;

/** Transport failures worth an immediate retry inside one attempt: nothing reached the receiver. */
const QUICK_RETRY_CODES = new Set(['ECONNRESET', 'ECONNREFUSED']);

/**
 * The worker's HTTP client: one axios instance over keep-alive agents (delivery is the hot
 * path), no redirects (a 3xx is an answer, and following it could bypass the SSRF guard),
 * no proxy from the environment, every status accepted as an answer, and axios-retry only
 * for connection reset or refused, twice, 100 ms apart (its default condition would retry
 * other things and never a POST on 5xx; the schedule owns those).
 *
 * With `proxyUrl`, targets outside `noProxy` go through the forward proxy (docs/design.md §14.2): http
 * ones in absolute form, https ones tunnelled with CONNECT. The SSRF guard then resolves and
 * checks the target itself before anything is written to the proxy, since the connection it
 * would otherwise check is the one to the proxy, which the operator chose and which is exempt.
 * The proxy's own answers are not the endpoint's: a 407 (to CONNECT, or to an
 * http target in absolute form, where only 407 is surely the proxy's) is `proxyUnauthorized`;
 * a CONNECT answered 403 is a refused target like the SSRF guard's (`blocked`); any other
 * refused CONNECT (502, 503, 504, or this or that proxy's 500) means the target could not be
 * reached, a connection error. None of them stores the proxy's body or status as the answer.
 *
 * A request with a client certificate goes out on an agent of its own per endpoint and
 * certificate (client-certificate-agents.ts), tunnelled the same way through the proxy.
 */
export function createHttpSender(options: HttpSenderOptions): HttpSender {
  const guard = createSsrfGuard(options.privateAllowlist ?? []);
  const agentOptions: http.AgentOptions = {
    keepAlive: true,
    // axios sets a 60 s TCP keep-alive delay on every request's socket: the agent's own default
    // (1 s, set again whenever a socket goes back to the pool) made each attempt cost eight
    // setsockopt calls switching it back and forth. Agreeing, Node sets it once per socket.
    keepAliveMsecs: TCP_KEEPALIVE_DELAY_MS,
    maxSockets: options.maxSockets,
    ...(options.blockPrivate ? { lookup: guard.lookup } : {}),
  };
  const httpAgent = new http.Agent(agentOptions);
  const httpsAgent = new https.Agent(agentOptions);
  const certificateAgents = createClientCertificateAgents(agentOptions);
  const proxy =
    options.proxyUrl === undefined
      ? undefined
      : createEgressProxy({
          url: options.proxyUrl,
          noProxy: options.noProxy ?? [],
          maxSockets: options.maxSockets,
          keepAliveMsecs: TCP_KEEPALIVE_DELAY_MS,
        });
  const client = axios.create({
    httpAgent,
    httpsAgent,
    proxy: false,
    maxRedirects: 0,
    responseType: 'stream',
    validateStatus: () => true,
  });
  axiosRetry(client, {
    retries: 2,
    retryDelay: (retryCount) => retryCount * 100,
    retryCondition: (error) => QUICK_RETRY_CODES.has(error.code ?? ''),
  });

  /** What an answer of the egress proxy itself comes to (see above); its body is dropped. */
  function proxyAnswered(status: number, url: string, started: number): SendResult {
    const outcome = { statusCode: null, retryAfterMs: null, timedOut: false, response: null, durationMs: elapsed(started) };
    if (status === 407) return { ...outcome, blocked: false, proxyUnauthorized: true, error: 'egress proxy refused the worker\'s credentials: 407' };
    if (status === 403) {
      options.logger?.warn({ url: shownUrl(url) }, 'egress proxy refused a delivery target (403)');
      return { ...outcome, blocked: true, proxyUnauthorized: false, error: 'egress proxy refused: 403' };
    }
    return { ...outcome, blocked: false, proxyUnauthorized: false, error: `egress proxy could not reach the target: ${status}` };
  }

  return {
    async send(request) {
      const started = performance.now();
      const controller = new AbortController();
      const timeLeftMs = request.deadline === undefined ? options.timeoutMs : Math.max(0, request.deadline - started);
      const timer = setTimeout(() => controller.abort(new AttemptTimeoutError(options.timeoutMs)), timeLeftMs);
      let statusCode: number | null = null;
      let retryAfterMs: number | null = null;
      let via: EgressProxy | undefined;
      try {
        const target = new URL(request.url);
        via = proxy?.applies(target) ? proxy : undefined;
        if (options.blockPrivate) {
          guard.assertLiteralTargetAllowed(target);
          if (via) await abortable(guard.assertResolvedTargetAllowed(target), controller.signal);
        }
        const certificate = request.clientCertificate && target.protocol === 'https:' ? request.clientCertificate : undefined;
        const tlsAgent = certificate ? certificateAgents.agentFor(certificate, via) : via?.httpsAgent;
        const response = await client.request<Readable>({
          url: request.url,
          method: request.method,
          data: request.body,
          headers: request.headers,
          signal: controller.signal,
          ...(via ? { httpAgent: via.httpAgent } : {}),
          ...(tlsAgent ? { httpsAgent: tlsAgent } : {}),
        });
        statusCode = response.status;
        if (via && statusCode === 407 && target.protocol === 'http:') {
          await readExcerpt(response.data, 0);
          return proxyAnswered(407, request.url, started);
        }
        const retryAfter = response.headers['retry-after'];
        retryAfterMs = parseRetryAfter(retryAfter === undefined ? undefined : String(retryAfter));
        const excerpt = await readExcerpt(response.data, request.excerptBytes ?? RESPONSE_EXCERPT_BYTES);
        return { statusCode, retryAfterMs, timedOut: false, blocked: false, error: null, response: excerpt, durationMs: elapsed(started), proxyUnauthorized: false };
      } catch (error) {
        const answered = findCause(error, EgressProxyAnswerError);
        if (answered) return proxyAnswered(answered.statusCode, request.url, started);
        const timedOut = controller.signal.aborted;
        const blocked = findCause(error, BlockedTargetError);
        if (blocked) options.logger?.warn({ url: shownUrl(request.url), host: blocked.host, address: blocked.address }, 'SSRF guard refused a delivery target');
        return {
          statusCode,
          retryAfterMs,
          timedOut,
          blocked: blocked !== undefined,
          error: timedOut ? `timeout: ${(controller.signal.reason as Error).message}` : describe(blocked ?? error, request.url, via !== undefined),
          response: null,
          durationMs: elapsed(started),
          proxyUnauthorized: false,
        };
      } finally {
        clearTimeout(timer);
      }
    },
    close() {
      httpAgent.destroy();
      httpsAgent.destroy();
      certificateAgents.close();
      proxy?.close();
    },
  };
}

/** Keeps the first `limit` bytes and drains the rest, so the keep-alive socket stays usable. */
function readExcerpt(stream: Readable, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let kept = 0;
    stream.on('data', (chunk: Buffer) => {
      if (kept >= limit) return;
      chunks.push(chunk);
      kept += chunk.length;
    });
    stream.once('end', () => resolve(Buffer.concat(chunks).subarray(0, limit).toString('utf8')));
    stream.once('error', reject);
  });
}

/** Settles as `work` does, or rejects with the signal's reason once it aborts (a DNS lookup cannot be cancelled). */
function abortable<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error as Error);
      },
    );
  });
}

function elapsed(started: number): number {
  return Math.round(performance.now() - started);
}

function findCause<T extends Error>(error: unknown, type: new (...args: never[]) => T): T | undefined {
  for (const current of errorChain(error)) {
    if (current instanceof type) return current;
  }
  return undefined;
}

/** A Node system error (ECONNREFUSED and the like) and the address it names. */
interface SystemError extends Error {
  code: string;
  syscall: string;
  address?: string;
  port?: number;
}

/**
 * The reason stored for users to read: the transport error with the URL's host in place of
 * the address it resolved to (`ECONNREFUSED: connect ECONNREFUSED receiver:3002`), so the
 * internal layout behind a name never shows (docs/design.md §6.3). Through the egress proxy the only
 * socket is the proxy's, so its errors say `egress proxy` and name neither its address nor
 * its credentials (`ECONNREFUSED: connect ECONNREFUSED egress proxy`).
 */
function describe(error: unknown, url: string, proxied: boolean): string {
  if (error instanceof BlockedTargetError) return error.message;
  const system = findSystemError(error);
  if (system) {
    if (system.address === undefined) return `${system.code}: ${system.message}`;
    if (proxied) return `${system.code}: ${system.syscall} ${system.code} egress proxy`;
    const port = system.port === undefined ? '' : `:${system.port}`;
    return `${system.code}: ${system.syscall} ${system.code} ${new URL(url).hostname}${port}`;
  }
  if (error instanceof AxiosError) return error.code ? `${error.code}: ${error.message}` : error.message;
  return error instanceof Error ? error.message : String(error);
}

function findSystemError(error: unknown): SystemError | undefined {
  for (const current of errorChain(error)) {
    const { code, syscall } = current as Partial<SystemError>;
    if (typeof code === 'string' && typeof syscall === 'string') return current as SystemError;
  }
  return undefined;
}
