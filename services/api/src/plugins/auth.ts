import type { FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import { QueryTypes, Sequelize } from 'sequelize';
import { hashApiToken, tokenHashesMatch } from '../users/api-token';

/** The caller, set on `request.user` by the layout's auth hook. */
export interface AuthenticatedUser {
  userId: number;
  /** 0 = unlimited (DESIGN §4). */
  quotaLimit: number;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the auth hook on every authenticated route; null elsewhere. */
    user: AuthenticatedUser | null;
  }
}

/** What a request claims: the user id header and the sha256 of its bearer token. */
export interface Credentials {
  userId: number;
  tokenHash: string;
}

/** Layout A's 401 body (Luminova's shape). */
export const LAYOUT_A_UNAUTHORIZED = { status: 401, message: 'Invalid authentication token or client ID.' } as const;
/** Layout B's 401 body. */
export const LAYOUT_B_UNAUTHORIZED = { message: 'Invalid credentials.' } as const;

const BEARER = /^Bearer +(\S+) *$/i;
const USER_ID = /^\d{1,5}$/;

/**
 * Reads `Authorization: Bearer <token>` (RFC 6750) and the user id from the `user_id`
 * header (the spec's name) or `X-Api-Client-Id` (Luminova's name, which survives proxies
 * that drop underscored headers, such as nginx by default).
 *
 * @returns null when either is missing or malformed; user ids are 1..99999
 */
export function readCredentials(request: FastifyRequest): Credentials | null {
  const authorization = request.headers.authorization;
  const rawId = request.headers['user_id'] ?? request.headers['x-api-client-id'];
  if (typeof authorization !== 'string' || typeof rawId !== 'string') return null;
  const token = BEARER.exec(authorization)?.[1];
  const id = rawId.trim();
  if (!token || !USER_ID.test(id) || Number(id) < 1) return null;
  return { userId: Number(id), tokenHash: hashApiToken(token) };
}

/**
 * Checks credentials against `users` with one primary-key lookup and a constant-time
 * comparison of token hashes.
 *
 * @returns the user, or null for an unknown user, a wrong or revoked token
 */
export function createAuthenticator(sequelize: Sequelize): (credentials: Credentials) => Promise<AuthenticatedUser | null> {
  return async ({ userId, tokenHash }) => {
    const [row] = await sequelize.query<{ api_token_hash: string | null; quota_limit: number }>(
      'SELECT api_token_hash, quota_limit FROM users WHERE user_id = $1',
      { bind: [userId], type: QueryTypes.SELECT, raw: true },
    );
    if (!tokenHashesMatch(row?.api_token_hash ?? null, tokenHash)) return null;
    return { userId, quotaLimit: row.quota_limit };
  };
}

/**
 * The Layout B auth hook (also fit for any route set without a quota): on success sets
 * `request.user`, else answers 401 with `unauthorizedBody` and stops the request.
 */
export function createAuthHook(sequelize: Sequelize, unauthorizedBody: object): onRequestHookHandler {
  const authenticate = createAuthenticator(sequelize);
  return async function authHook(request: FastifyRequest, reply: FastifyReply) {
    const credentials = readCredentials(request);
    const user = credentials && (await authenticate(credentials));
    if (!user) return reply.code(401).send(unauthorizedBody);
    request.user = user;
  };
}
