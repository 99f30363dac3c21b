import fastifyRateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ErrorBody } from '../error-handler';
import type { GuardHook } from './auth';
import { coalescingRedisStore } from './rate-limit-store';

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
 * The per-principal rate limit of every route under /api/v1 (docs/design.md §12), with
 * `@fastify/rate-limit` over the app's Redis so that the count holds across api processes
 * (a fixed one-minute window per principal, atomic in a Lua script; concurrent requests of
 * one principal share a round trip, see {@link coalescingRedisStore}). Past the limit: 429 with
 * `Retry-After`, `RateLimit-Limit`, `RateLimit-Remaining` and `RateLimit-Reset` (seconds; IETF
 * draft-ietf-httpapi-ratelimit-headers) in the layout's error shape. Redis being away lets
 * requests through: the limit protects the api, it must not take it down.
 *
 * @returns a guard step to run once the principal is known (or known to be missing); null when off
 */
export async function createRateLimitGuard(app: FastifyInstance, { perMinute, prefix, errorBody }: RateLimitOptions): Promise<GuardHook | null> {
  if (perMinute === 0) return null;
  await app.register(fastifyRateLimit, {
    global: false,
    max: perMinute,
    timeWindow: WINDOW_MS,
    store: coalescingRedisStore(app.redis, `${prefix}:rate-limit:`),
    skipOnError: true,
    keyGenerator: rateLimitKey,
  });
  const limit = app.createRateLimit();
  return async (request, reply) => {
    const outcome = await limit(request);
    if (outcome.isAllowed || !outcome.isExceeded) return undefined;
    const seconds = Math.max(1, outcome.ttlInSeconds);
    request.log.info({ reason: 'rate_limited', key: outcome.key }, 'request refused');
    return reply
      .code(429)
      .header('Retry-After', seconds)
      .header('RateLimit-Limit', outcome.max)
      .header('RateLimit-Remaining', 0)
      .header('RateLimit-Reset', seconds)
      .send(errorBody(429, `Rate limit exceeded: ${outcome.max} requests per minute. Retry in ${seconds} s.`));
  };
}
