import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../errors';
import { PORTAL_SESSION_FORMAT } from '../portal/portal-tokens';
import { hashApiToken, tokenHashesMatch } from '../users/api-token';
import { SERVICE_KEY_FORMAT } from '../users/service-key';
import type { CredentialStore } from './credential-store';
import type { Principal } from './principal';

/** The calling user, set on `request.user` by the layout's auth hook (service keys leave it null). */
export interface AuthenticatedUser {
  userId: number;
  /** 0 = unlimited. */
  quotaLimit: number;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the auth hook when a user token authenticated the request; null elsewhere. */
    user: AuthenticatedUser | null;
  }
  interface FastifyContextConfig {
    /**
     * The route takes no credentials (docs/design.md §11.6: the portal link exchange, whose credential
     * is in its body): the auth hook only rate-limits it by client address.
     */
    public?: boolean;
  }
}

/** Layout A's 401 body (Luminova's shape). */
export const LAYOUT_A_UNAUTHORIZED = { status: 401, message: 'Invalid authentication token or client ID.' } as const;
/** Layout B's 401 body. */
export const LAYOUT_B_UNAUTHORIZED = { message: 'Invalid credentials.' } as const;

/**
 * Why a request was refused, logged at info as `reason` (never the token); every refusal
 * answers the same 401, as the spec says.
 */
export type RefusalReason =
  | 'missing_token'
  | 'malformed_authorization'
  | 'missing_user_id'
  | 'malformed_user_id'
  | 'malformed_service_key'
  | 'unknown_user'
  | 'unknown_token'
  | 'user_mismatch'
  | 'revoked'
  | 'expired'
  | 'service_key_not_allowed'
  | 'portal_session_not_allowed';

/** What a request presents: a user's token and id, a service key or a portal session (each only as sha256). */
export type Credentials =
  | { kind: 'user'; userId: number; tokenHash: string }
  | { kind: 'service_key'; keyHash: string }
  | { kind: 'portal_session'; sessionHash: string };

/** The result of authenticating one request. */
export type AuthOutcome = { ok: true; principal: Principal } | { ok: false; reason: RefusalReason };

const BEARER = /^Bearer +(\S+) *$/i;
const USER_ID = /^\d{1,5}$/;

/**
 * Reads `Authorization: Bearer <token>` (RFC 6750) and the user id from the `user_id` header
 * (the spec's name) or `X-Api-Client-Id` (Luminova's name, which survives proxies that drop
 * underscored headers, such as nginx by default). A bearer `sk_` key with no user id is a
 * service key (docs/design.md §4); a bearer `ps_` token with no user id is a portal session (§11.6).
 *
 * @returns the credentials, or why they cannot be read; user ids are 1..99999
 */
export function readCredentials(request: FastifyRequest): Credentials | { kind: 'refused'; reason: RefusalReason } {
  const authorization = request.headers.authorization;
  if (authorization === undefined || authorization === '') return { kind: 'refused', reason: 'missing_token' };
  const token = BEARER.exec(authorization)?.[1];
  if (!token) return { kind: 'refused', reason: 'malformed_authorization' };
  const rawId = request.headers['user_id'] ?? request.headers['x-api-client-id'];
  if (rawId === undefined) {
    if (SERVICE_KEY_FORMAT.test(token)) return { kind: 'service_key', keyHash: hashApiToken(token) };
    if (PORTAL_SESSION_FORMAT.test(token)) return { kind: 'portal_session', sessionHash: hashApiToken(token) };
    return { kind: 'refused', reason: token.startsWith('sk_') ? 'malformed_service_key' : 'missing_user_id' };
  }
  const id = typeof rawId === 'string' ? rawId.trim() : '';
  if (!USER_ID.test(id) || Number(id) < 1) return { kind: 'refused', reason: 'malformed_user_id' };
  return { kind: 'user', userId: Number(id), tokenHash: hashApiToken(token) };
}

/**
 * Authenticates a request against the credential store; hashes are compared in constant time.
 *
 * @param serviceKeys - whether this route takes service keys and portal sessions; where it
 *   does not (the posts routes, which act for a user), both are refused like any unknown credential
 */
export function createAuthenticator(store: CredentialStore): (request: FastifyRequest, serviceKeys: boolean) => Promise<AuthOutcome> {
  return async (request, serviceKeys) => {
    const credentials = readCredentials(request);
    if (credentials.kind === 'refused') return { ok: false, reason: credentials.reason };
    if (credentials.kind === 'service_key') {
      if (!serviceKeys) return { ok: false, reason: 'service_key_not_allowed' };
      const key = await store.findServiceKey(credentials.keyHash);
      if (!tokenHashesMatch(key?.keyHash ?? null, credentials.keyHash)) return { ok: false, reason: 'unknown_token' };
      if (key!.revoked) return { ok: false, reason: 'revoked' };
      store.touchServiceKey(key!.id);
      return { ok: true, principal: { kind: 'service', keyId: key!.id, name: key!.name, scopes: key!.scopes } };
    }
    if (credentials.kind === 'portal_session') {
      if (!serviceKeys) return { ok: false, reason: 'portal_session_not_allowed' };
      const session = await store.findPortalSession(credentials.sessionHash);
      if (!tokenHashesMatch(session?.tokenHash ?? null, credentials.sessionHash)) return { ok: false, reason: 'unknown_token' };
      if (session!.revoked) return { ok: false, reason: 'revoked' };
      if (session!.expiresAt <= Date.now()) return { ok: false, reason: 'expired' };
      return { ok: true, principal: { kind: 'portal', userId: session!.userId, scope: session!.scope, linkId: session!.linkId } };
    }
    const user = await store.findUser(credentials.userId);
    if (!tokenHashesMatch(user?.tokenHash ?? null, credentials.tokenHash)) {
      return { ok: false, reason: await userRefusalReason(store, credentials, user?.tokenHash) };
    }
    return { ok: true, principal: { kind: 'user', userId: credentials.userId, quotaLimit: user!.quotaLimit } };
  };
}

// Only refusals pay for this second look-up, which makes the log say what went wrong.
async function userRefusalReason(store: CredentialStore, credentials: { userId: number; tokenHash: string }, stored: string | null | undefined): Promise<RefusalReason> {
  const owner = await store.findTokenOwner(credentials.tokenHash);
  if (owner !== null) return 'user_mismatch';
  if (stored === undefined) return 'unknown_user';
  return stored === null ? 'revoked' : 'unknown_token';
}

/**
 * A step of a layout's request guard (auth, rate limit, quota), usable as an onRequest or
 * preHandler hook: it resolves with the reply when it answered the request itself (which
 * stops the request), else with nothing.
 */
export type GuardHook = (request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply | undefined>;

/** Runs guard steps in order, stopping at the first that answers the request. */
export function chainGuards(...steps: GuardHook[]): GuardHook {
  return async (request, reply) => {
    for (const step of steps) {
      const answered = await step(request, reply);
      if (answered) return answered;
    }
    return undefined;
  };
}

/** Answers a refused request: logs the reason at info (never the token) and sends 401 with the layout's body. */
export function refuse(request: FastifyRequest, reply: FastifyReply, reason: RefusalReason, unauthorizedBody: object): FastifyReply {
  request.log.info({ reason }, 'authentication refused');
  return reply.code(401).send(unauthorizedBody);
}

export interface AuthHookOptions {
  store: CredentialStore;
  /** The layout's 401 body. */
  unauthorizedBody: object;
  /** Whether the request's route takes service keys and portal sessions (docs/design.md §4, §11.1: all but the posts routes). */
  serviceKeysAllowed(request: FastifyRequest): boolean;
  /**
   * The rate limit (docs/design.md §12), run once the principal is known, and for a refused request
   * before its 401, so that refused requests count against the client's address.
   */
  rateLimit?: GuardHook | null;
}

/**
 * The layouts' auth hook: on success sets `request.principal` (and `request.user` for a
 * user), else logs the reason and answers 401 with `unauthorizedBody`, stopping the request.
 * With `rateLimit`, a request past the limit is answered 429 instead. A route with
 * `config: { public: true }` is only rate-limited.
 *
 * @throws ApiError 403 `This portal session is read-only.` for anything but GET or HEAD in a
 *   `read` portal session (docs/design.md §11.6), answered in the layout's shape by its error handler
 */
export function createAuthHook({ store, unauthorizedBody, serviceKeysAllowed, rateLimit }: AuthHookOptions): GuardHook {
  const authenticate = createAuthenticator(store);
  return async function authHook(request, reply) {
    if (request.routeOptions.config.public === true) return rateLimit?.(request, reply);
    const outcome = await authenticate(request, serviceKeysAllowed(request));
    if (outcome.ok) {
      request.principal = outcome.principal;
      // One object, so the quota hook's view of the user's limit is the principal's too.
      if (outcome.principal.kind === 'user') request.user = outcome.principal;
    }
    const limited = rateLimit ? await rateLimit(request, reply) : undefined;
    if (limited) return limited;
    if (!outcome.ok) return refuse(request, reply, outcome.reason, unauthorizedBody);
    const principal = outcome.principal;
    if (principal.kind === 'portal' && principal.scope === 'read' && request.method !== 'GET' && request.method !== 'HEAD') {
      throw new ApiError(403, 'This portal session is read-only.');
    }
    return undefined;
  };
}
