import { createServer, IncomingMessage, ServerResponse } from 'node:http';
import { verifyHex } from '../shared/webhook/signing';
import { percentile } from './lib/timing';

/**
 * The receiving end of the delivery benchmarks, run as its own process: it takes every POST,
 * verifies `X-Signature` (our module, over the raw bytes) when the request carries one,
 * counts each webhook once by its id, optionally waits before answering, and reports its
 * counters at `GET /stats`. Environment: SINK_SECRET (the endpoint's secret), SINK_DELAY_MS
 * (default 0), SINK_LATENCY=1 (measure receipt time minus the envelope's `_data.created_at`).
 * It tells its parent the port it listens on over IPC.
 */

/** What `GET /stats` answers; times are unix milliseconds. */
export interface SinkStats {
  received: number;
  duplicates: number;
  unsigned: number;
  badSignatures: number;
  firstAt: number | null;
  lastAt: number | null;
  latency: { count: number; p50: number; p99: number; max: number };
}

const secret = process.env.SINK_SECRET ?? '';
const delayMs = Number(process.env.SINK_DELAY_MS ?? 0);
const measureLatency = process.env.SINK_LATENCY === '1';

let seen = new Set<string>();
let stats = emptyStats();
let latencies: number[] = [];

const server = createServer((request, response) => {
  if (request.method === 'GET' && request.url === '/stats') return sendJson(response, 200, currentStats());
  if (request.method === 'POST' && request.url === '/reset') {
    seen = new Set();
    stats = emptyStats();
    latencies = [];
    return sendJson(response, 200, { status: 'OK' });
  }
  readBody(request)
    .then((body) => receive(request, response, body))
    .catch(() => sendJson(response, 400, { status: 'ERROR' }));
});
// Longer than any worker's idle keep-alive, so connections are reused rather than raced.
server.keepAliveTimeout = 65_000;

function receive(request: IncomingMessage, response: ServerResponse, body: Buffer): void {
  const now = Date.now();
  const signature = request.headers['x-signature'];
  if (signature === undefined) stats.unsigned += 1;
  else if (!verifyHex(body, secret, signature)) {
    stats.badSignatures += 1;
    return sendJson(response, 500, { status: 'ERROR' });
  }
  const id = String(request.headers['webhook-id'] ?? request.headers['x-bench-id'] ?? '');
  if (seen.has(id)) stats.duplicates += 1;
  else {
    seen.add(id);
    stats.received += 1;
    stats.firstAt ??= now;
    stats.lastAt = now;
    if (measureLatency) {
      const createdAt = Date.parse(JSON.parse(body.toString('utf8'))?._data?.created_at);
      if (!Number.isNaN(createdAt)) latencies.push(now - createdAt);
    }
  }
  if (delayMs > 0) setTimeout(() => sendJson(response, 200, { status: 'OK' }), delayMs);
  else sendJson(response, 200, { status: 'OK' });
}

function currentStats(): SinkStats {
  const sorted = [...latencies].sort((a, b) => a - b);
  return {
    ...stats,
    latency: { count: sorted.length, p50: percentile(sorted, 50), p99: percentile(sorted, 99), max: sorted.at(-1) ?? Number.NaN },
  };
}

function emptyStats(): Omit<SinkStats, 'latency'> {
  return { received: 0, duplicates: 0, unsigned: 0, badSignatures: 0, firstAt: null, lastAt: null };
}

function readBody(request: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => resolve(Buffer.concat(chunks)));
    request.on('error', reject);
  });
}

function sendJson(response: ServerResponse, status: number, value: unknown): void {
  response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value));
}

server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const address = server.address();
  process.send?.({ port: typeof address === 'object' && address ? address.port : 0 });
});
process.once('SIGTERM', () => {
  server.close(() => process.exit(0));
  server.closeAllConnections();
});
