import { randomBytes } from 'node:crypto';
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { ArrivalLog } from './arrival-log';
import { commonNameOf } from './recording-server';

/** One token request as the server saw it. */
export interface TokenRequest {
  /** The client id and secret of the Basic Authorization, form-decoded (RFC 6749 §2.3.1); null without one. */
  client: { id: string; secret: string } | null;
  /** The form body's fields. */
  form: Record<string, string>;
  /** The subject CN of a client certificate presented to this server (TLS only), else null. */
  clientCertificate: string | null;
}

/**
 * A real OAuth2 token endpoint on 127.0.0.1 (RFC 6749 §4.4, client credentials, client
 * authentication by HTTP Basic), and the check a receiver makes of the bearer tokens it issued.
 */
export interface TokenServer {
  /** `http(s)://127.0.0.1:<port>/oauth/token`. */
  readonly url: string;
  /** Every token request so far, oldest first. */
  readonly requests: TokenRequest[];
  /** Resolves once at least `count` token requests arrived. */
  waitForRequests(count: number, timeoutMs?: number): Promise<TokenRequest[]>;
  /** Whether an Authorization header value is `Bearer <a token this server issued and did not revoke>`. */
  accepts(authorization: string | string[] | undefined): boolean;
  /** Revokes every token issued so far (a receiver then answers them 401). */
  revokeAll(): void;
  /** The client credentials it accepts from now on. */
  setClient(id: string, secret: string): void;
  /** `expires_in` of the tokens issued from now on, seconds; null leaves it out. */
  setExpiresIn(seconds: number | null): void;
  close(): Promise<void>;
}

/**
 * Starts a {@link TokenServer} accepting `client`. Wrong credentials get 401
 * `{"error": "invalid_client", "error_description": ...}` with a description that names a
 * canary (`token-server-body`), which must never reach a delivery's `last_error`.
 *
 * @param options.tls - serve HTTPS with this key and certificate; client certificates are asked for but not required
 */
export async function startTokenServer(
  client: { id: string; secret: string },
  options: { expiresIn?: number | null; tls?: { key: string; cert: string } } = {},
): Promise<TokenServer> {
  const log = new ArrivalLog<TokenRequest>('token requests');
  const live = new Set<string>();
  let accepted = client;
  let expiresIn = options.expiresIn === undefined ? 3600 : options.expiresIn;

  const handle = (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const form = Object.fromEntries(new URLSearchParams(Buffer.concat(chunks).toString('utf8')));
      const clientCertificate = options.tls ? commonNameOf(req.socket as TLSSocket) : null;
      const request = { client: basicClient(req.headers.authorization), form, clientCertificate };
      log.push(request);
      const json = (status: number, body: object) => {
        res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
        res.end(JSON.stringify(body));
      };
      if (form.grant_type !== 'client_credentials') return json(400, { error: 'unsupported_grant_type' });
      if (request.client?.id !== accepted.id || request.client.secret !== accepted.secret) {
        return json(401, { error: 'invalid_client', error_description: 'token-server-body: unknown client' });
      }
      const token = `tok_${randomBytes(12).toString('base64url')}`;
      live.add(token);
      return json(200, { access_token: token, token_type: 'Bearer', ...(expiresIn === null ? {} : { expires_in: expiresIn }) });
    });
  };
  const server: Server = options.tls ? createHttpsServer({ ...options.tls, requestCert: true, rejectUnauthorized: false }, handle) : createServer(handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `${options.tls ? 'https' : 'http'}://127.0.0.1:${port}/oauth/token`,
    requests: log.entries,
    waitForRequests: (count, timeoutMs) => log.waitFor(count, timeoutMs),
    accepts: (authorization) => typeof authorization === 'string' && authorization.startsWith('Bearer ') && live.has(authorization.slice(7)),
    revokeAll: () => live.clear(),
    setClient(id, secret) {
      accepted = { id, secret };
    },
    setExpiresIn(seconds) {
      expiresIn = seconds;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The client of `Authorization: Basic base64(urlencode(id):urlencode(secret))`, or null. */
function basicClient(authorization: string | undefined): { id: string; secret: string } | null {
  if (!authorization?.startsWith('Basic ')) return null;
  const decoded = Buffer.from(authorization.slice(6), 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return null;
  const formDecode = (value: string) => decodeURIComponent(value.replace(/\+/g, ' '));
  return { id: formDecode(decoded.slice(0, colon)), secret: formDecode(decoded.slice(colon + 1)) };
}
