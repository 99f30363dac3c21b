import { type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { ArrivalLog } from './arrival-log';

/** One request as the server saw it. */
export interface RecordedRequest {
  method: string;
  /** Path without the query string, e.g. `/hooks/a`. */
  path: string;
  /** The query string exactly as sent, without `?` (empty when none). */
  rawQuery: string;
  /** Decoded query parameters (the last value wins for repeated names). */
  query: Record<string, string>;
  /** Header names in lower case, as Node gives them. */
  headers: IncomingHttpHeaders;
  /** The body bytes exactly as received. */
  body: Buffer;
  /** `Date.now()` when the request's body was fully read. */
  receivedAt: number;
  /** Over TLS, the subject CN of the client certificate the connection presented; else null. */
  clientCertificate: string | null;
}

/** How the server answers one request. Every field is optional. */
export interface ReplyPlan {
  /** HTTP status; default 200. */
  status?: number;
  /** Extra response headers, e.g. `{ 'Retry-After': '120' }`. */
  headers?: Record<string, string>;
  /** Response body: a string or bytes as is, anything else as JSON; default `{"ok":true}`. */
  body?: unknown;
  /** Wait this long (milliseconds) before answering, to provoke client timeouts. */
  delayMs?: number;
  /** Destroy the socket without answering, which the client sees as a connection reset. */
  reset?: boolean;
}

/** A real HTTP server on 127.0.0.1 with a free port that records every request. */
export interface RecordingServer {
  /** `http://127.0.0.1:<port>` (`https://` with TLS), without a trailing slash. */
  readonly url: string;
  readonly port: number;
  /** Every request so far, oldest first. */
  readonly requests: RecordedRequest[];
  /** Answers every later request with `plan` (or what the function returns for it). */
  setReply(plan: ReplyPlan | ((request: RecordedRequest) => ReplyPlan)): void;
  /** Answers the next request with `plan`, ahead of the default; calls queue up in order. */
  replyOnce(plan: ReplyPlan): void;
  /** Resolves once at least `count` requests were recorded; rejects after `timeoutMs` (default 5000). */
  waitForRequests(count: number, timeoutMs?: number): Promise<RecordedRequest[]>;
  /** Forgets recorded requests and queued replies; the default reply is kept. */
  reset(): void;
  /** Drops open connections (pending delayed answers included) and stops listening. */
  close(): Promise<void>;
}

/** How the server listens. */
export interface RecordingServerOptions {
  /**
   * Serve HTTPS with this PEM key and certificate (for example `TEST_TLS` of tls-fixture.ts).
   * With `clientCa`, mutual TLS: a client must present a certificate that CA issued, or the
   * handshake fails and nothing is recorded.
   */
  tls?: { key: string; cert: string; clientCa?: string };
}

/**
 * Starts a {@link RecordingServer}.
 *
 * @example
 * const server = await startRecordingServer();
 * server.replyOnce({ status: 500 });
 * await send(server.url + '/hook');
 * expect(server.requests[0].body.toString()).toBe('...');
 * await server.close();
 */
export async function startRecordingServer(initial: ReplyPlan = {}, options: RecordingServerOptions = {}): Promise<RecordingServer> {
  const log = new ArrivalLog<RecordedRequest>('requests');
  const requests = log.entries;
  const queued: ReplyPlan[] = [];
  const timers = new Set<NodeJS.Timeout>();
  let fallback: ReplyPlan | ((request: RecordedRequest) => ReplyPlan) = initial;

  const handle = (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const recorded = record(req, Buffer.concat(chunks));
      log.push(recorded);
      const plan = queued.shift() ?? (typeof fallback === 'function' ? fallback(recorded) : fallback);
      const timer = setTimeout(() => {
        timers.delete(timer);
        answer(req, res, plan);
      }, plan.delayMs ?? 0);
      timers.add(timer);
    });
  };
  const { clientCa, ...tls } = options.tls ?? {};
  const mutual = clientCa === undefined ? {} : { ca: [clientCa], requestCert: true, rejectUnauthorized: true };
  const server: Server = options.tls ? createHttpsServer({ ...tls, ...mutual }, handle) : createServer(handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `${options.tls ? 'https' : 'http'}://127.0.0.1:${port}`,
    port,
    requests,
    setReply(plan) {
      fallback = plan;
    },
    replyOnce(plan) {
      queued.push(plan);
    },
    waitForRequests(count, timeoutMs = 5000) {
      return log.waitFor(count, timeoutMs);
    },
    reset() {
      requests.length = 0;
      queued.length = 0;
    },
    async close() {
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function record(req: IncomingMessage, body: Buffer): RecordedRequest {
  const target = req.url ?? '/';
  const mark = target.indexOf('?');
  const rawQuery = mark < 0 ? '' : target.slice(mark + 1);
  return {
    method: req.method ?? '',
    path: mark < 0 ? target : target.slice(0, mark),
    rawQuery,
    query: Object.fromEntries(new URLSearchParams(rawQuery)),
    headers: req.headers,
    body,
    receivedAt: Date.now(),
    clientCertificate: 'getPeerCertificate' in req.socket ? commonNameOf(req.socket as TLSSocket) : null,
  };
}

function answer(req: IncomingMessage, res: ServerResponse, plan: ReplyPlan): void {
  if (plan.reset) {
    req.socket.destroy();
    return;
  }
  const raw = plan.body ?? { ok: true };
  const isBytes = typeof raw === 'string' || Buffer.isBuffer(raw);
  const payload = isBytes ? raw : JSON.stringify(raw);
  const type = isBytes ? 'text/plain; charset=utf-8' : 'application/json';
  res.writeHead(plan.status ?? 200, { 'Content-Type': type, ...plan.headers });
  res.end(payload);
}

/** The subject CN of the client certificate a TLS connection presented, or null. */
export function commonNameOf(socket: TLSSocket): string | null {
  const cn = socket.getPeerCertificate().subject?.CN;
  return Array.isArray(cn) ? cn.join(',') : (cn ?? null);
}
