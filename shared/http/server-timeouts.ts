import type { ServerOptions } from 'node:http';

/** Headers not complete within this are answered 408 and the connection closed, ms. */
export const HEADERS_TIMEOUT_MS = 10_000;
/** A keep-alive connection with no request for this long is closed, ms. */
export const KEEP_ALIVE_TIMEOUT_MS = 5_000;
// Node looks for expired requests this often (its default is 30 s): a timeout ends within a second of it.
const CONNECTIONS_CHECKING_INTERVAL_MS = 1_000;

/** The Fastify options that bound how long a client may hold a connection (see {@link serverTimeouts}). */
export interface ServerTimeoutOptions {
  requestTimeout: number;
  keepAliveTimeout: number;
  http: ServerOptions;
}

/**
 * The timeouts of the api's and the receiver's HTTP server (docs/design.md "Servers and their
 * limits"), to spread into `Fastify({...})`: a request not received whole within
 * `requestTimeoutMs` (a body trickled in, a byte at a time) is answered 408 and its connection
 * closed, as are headers not complete within 10 s (or `requestTimeoutMs` when shorter, as Node
 * requires); an idle keep-alive connection closes after 5 s. Node checks every second.
 *
 * @param requestTimeoutMs - REQUEST_TIMEOUT_MS, milliseconds
 */
export function serverTimeouts(requestTimeoutMs: number): ServerTimeoutOptions {
  // Fastify sets requestTimeout and keepAliveTimeout on the server after creating it; the
  // rest only Node's constructor takes, and it checks headersTimeout against requestTimeout.
  return {
    requestTimeout: requestTimeoutMs,
    keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
    http: {
      requestTimeout: requestTimeoutMs,
      headersTimeout: Math.min(HEADERS_TIMEOUT_MS, requestTimeoutMs),
      keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
      connectionsCheckingInterval: CONNECTIONS_CHECKING_INTERVAL_MS,
    },
  };
}
