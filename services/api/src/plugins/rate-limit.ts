import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ErrorBody } from '../error-handler';
import type { GuardHook } from './auth';
import { coalescingRedisCounter } from './rate-limit-store';

export interface RateLimitOptions {
  /** RATE_LIMIT_PER_MIN; 0 turns the limit off. */
  perMinute: number;
  /** REDIS_PREFIX: counters live under `<prefix>:rate-limit:`, shared by every api process. */
  prefix: string;
  /** The layout's error shape. */
  errorBody: ErrorBody;
}

const WINDOW_MS = 60_000;

/**
 * Whom a request counts against (docs/design.md §12): its user (also through a portal session) or
 * service key once authenticated, else the client's address (Fastify's `request.ip`; behind
 * a proxy set trustProxy).
 */
export function rateLimitKey(request: FastifyRequest): string {
  const principal = request.principal;
  if (principal?.kind === 'user' || principal?.kind === 'portal') return `user:${principal.userId}`;
  if (principal?.kind === 'service') return `key:${principal.keyId}`;
  return `ip:${request.ip}`;
}

/**
 * The per-principal rate limit of every route under /api/v1 (docs/design.md §12), counted in the
 * app's Redis so that the count holds across api processes (a fixed one-minute window per
 * principal, atomic in a Lua script; concurrent requests of one principal share a round trip,
 * see {@link coalescingRedisCounter}). Past the limit: 429 with `Retry-After`, `RateLimit-Limit`,
 * `RateLimit-Remaining` and `RateLimit-Reset` (seconds; IETF draft-ietf-httpapi-ratelimit-headers)
 * in the layout's error shape. Redis being away lets requests through: the limit protects the
 * api, it must not take it down.
 *
 * @returns a guard step to run once the principal is known (or known to be missing); null when off
 */
export function createRateLimitGuard(app: FastifyInstance, { perMinute, prefix, errorBody }: RateLimitOptions): GuardHook | null {
  if (perMinute === 0) return null;
  const counter = coalescingRedisCounter(app.redis, `${prefix}:rate-limit:`, WINDOW_MS);
  return async (request, reply) => {
    const key = rateLimitKey(request);
    let counted;
    try {
      counted = await counter.count(key);
    } catch {
      return undefined;
    }
    if (counted.current <= perMinute) return undefined;
    const seconds = Math.max(1, Math.ceil(counted.ttl / 1000));
    request.log.info({ reason: 'rate_limited', key }, 'request refused');
    return reply
      .code(429)
      .header('Retry-After', seconds)
      .header('RateLimit-Limit', perMinute)
      .header('RateLimit-Remaining', 0)
      .header('RateLimit-Reset', seconds)
      .send(errorBody(429, `Rate limit exceeded: ${perMinute} requests per minute. Retry in ${seconds} s.`));
  };
}
