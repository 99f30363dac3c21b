import type { FastifyRequest } from 'fastify';
import { ApiError } from '../errors';
import type { Scope } from '../users/scopes';

/** An end user, authenticated by bearer token and user id. */
export interface UserPrincipal {
  kind: 'user';
  userId: number;
  /** 0 = unlimited. */
  quotaLimit: number;
}

/** Another service or an operator, authenticated by an `sk_` service key. */
export interface ServicePrincipal {
  kind: 'service';
  keyId: number;
  name: string;
  scopes: readonly string[];
}

/**
 * A user in the dashboard's portal mode, authenticated by a `ps_` session that a portal link
 * opened (docs/design.md §11.6): that user's own things on the operations routes only; `read` sessions
 * make GET requests only.
 */
export interface PortalPrincipal {
  kind: 'portal';
  userId: number;
  scope: 'read' | 'manage';
  /** The portal link the session came from. */
  linkId: number;
}

/** Who is calling: set on `request.principal` by the layout's auth hook. */
export type Principal = UserPrincipal | ServicePrincipal | PortalPrincipal;

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the auth hook on every authenticated route; null elsewhere. */
    principal: Principal | null;
  }
}

/** Whether a service principal holds `scope` (or `*`); always false for a user. */
export function hasScope(principal: Principal | null, scope: Scope): boolean {
  return principal?.kind === 'service' && (principal.scopes.includes('*') || principal.scopes.includes(scope));
}

/**
 * For routes only service keys may use (docs/design.md §4, §6.2): the key holding `scope`.
 *
 * @throws ApiError 403 `A service key with the scope <scope> is required.` for a user token or a portal session;
 *   403 `This key lacks the scope <scope>.` for a key without it
 */
export function requireServiceScope(request: FastifyRequest, scope: Scope): ServicePrincipal {
  const principal = currentPrincipal(request);
  if (principal.kind !== 'service') throw new ApiError(403, `A service key with the scope ${scope} is required.`);
  if (!hasScope(principal, scope)) throw new ApiError(403, `This key lacks the scope ${scope}.`);
  return principal;
}

/** What an operations route may see: everything (an operator's key), or one user's own things. */
export type Visibility = { operator: true } | { operator: false; userId: number };

/**
 * For routes that operators (a key with `scope`) and users (their own things only, also
 * through a portal session) share (docs/design.md §11.6).
 *
 * @throws ApiError 403 `This key lacks the scope <scope>.` for a key without it
 */
export function visibilityFor(request: FastifyRequest, scope: Scope): Visibility {
  const principal = currentPrincipal(request);
  if (principal.kind !== 'service') return { operator: false, userId: principal.userId };
  if (!hasScope(principal, scope)) throw new ApiError(403, `This key lacks the scope ${scope}.`);
  return { operator: true };
}

/** The caller of an authenticated route. */
export function currentPrincipal(request: FastifyRequest): Principal {
  if (!request.principal) throw new Error(`${request.method} ${request.url}: route is not behind the auth hook`);
  return request.principal;
}
