import { QueryTypes, Sequelize } from 'sequelize';
import { tokenHashesMatch } from '../users/api-token';
import { GuardHook, LAYOUT_A_UNAUTHORIZED, readCredentials, refuse } from './auth';

/** A user's claim to count against: their id and the sha256 of their bearer token. */
interface UserCredentials {
  userId: number;
  tokenHash: string;
}

/** The outcome of one counted request. */
export type QuotaOutcome =
  | { kind: 'unlimited'; userId: number }
  | { kind: 'counted' | 'exceeded'; userId: number; limit: number; used: number; resetSeconds: number };

interface QuotaRow {
  api_token_hash: string | null;
  quota_limit: number;
  quota_used: number;
  quota_period_start: Date;
  counted_used: number | null;
  counted_period_start: Date | null;
  now: Date;
}

// One statement authenticates and counts. The UPDATE re-checks its WHERE on the newest row
// version when concurrent requests race (READ COMMITTED), so the increment is atomic and at
// most quota_limit requests pass per period. It only writes for a matching token and a
// limited user; `candidate` supplies the stored hash for the constant-time check in Node
// and the state to report when the UPDATE refused.
const COUNT_REQUEST = `
WITH candidate AS (
  SELECT api_token_hash, quota_limit, quota_used, quota_period_start FROM users WHERE user_id = $1
), counted AS (
  UPDATE users AS u SET
    quota_used = CASE WHEN u.quota_period_start <= now() - $3::int * interval '1 second' THEN 1 ELSE u.quota_used + 1 END,
    quota_period_start = CASE WHEN u.quota_period_start <= now() - $3::int * interval '1 second' THEN now() ELSE u.quota_period_start END
  WHERE u.user_id = $1 AND u.api_token_hash = $2 AND u.quota_limit > 0
    AND (u.quota_period_start <= now() - $3::int * interval '1 second' OR u.quota_used < u.quota_limit)
  RETURNING u.quota_used, u.quota_period_start
)
SELECT c.api_token_hash, c.quota_limit, c.quota_used, c.quota_period_start,
       k.quota_used AS counted_used, k.quota_period_start AS counted_period_start, now() AS now
FROM candidate c LEFT JOIN counted k ON true`;

/**
 * Layout A's authenticate-and-count (docs/design.md §4): one atomic statement per request.
 *
 * @param periodSeconds - QUOTA_PERIOD_S; a period starts at the first request after the previous one ended
 * @returns null for bad credentials (nothing is counted), else the quota outcome
 */
export function createQuotaCounter(
  sequelize: Sequelize,
  periodSeconds: number,
): (credentials: UserCredentials) => Promise<QuotaOutcome | null> {
  const resetSeconds = (start: Date, now: Date) => Math.max(1, Math.ceil((start.getTime() + periodSeconds * 1000 - now.getTime()) / 1000));
  return async ({ userId, tokenHash }) => {
    const [row] = await sequelize.query<QuotaRow>(COUNT_REQUEST, {
      bind: [userId, tokenHash, periodSeconds],
      type: QueryTypes.SELECT,
      raw: true,
    });
    if (!tokenHashesMatch(row?.api_token_hash ?? null, tokenHash)) return null;
    if (row.quota_limit === 0) return { kind: 'unlimited', userId };
    if (row.counted_used !== null && row.counted_period_start !== null) {
      const reset = resetSeconds(row.counted_period_start, row.now);
      return { kind: 'counted', userId, limit: row.quota_limit, used: row.counted_used, resetSeconds: reset };
    }
    return { kind: 'exceeded', userId, limit: row.quota_limit, used: row.quota_limit, resetSeconds: resetSeconds(row.quota_period_start, row.now) };
  };
}

/**
 * Layout A's quota hook, after the auth hook: counts each request of a user with a quota
 * (service keys and unlimited users pass uncounted) and sends `RateLimit-Limit`,
 * `RateLimit-Remaining` and `RateLimit-Reset` (seconds; IETF draft-ietf-httpapi-ratelimit-headers).
 * Quota spent: 401 `Quota exceeded limit: N` with `Retry-After` in seconds (RFC 9110 §10.2.3).
 * The counting statement re-checks the token, so a token rotated meanwhile is refused (401
 * {@link LAYOUT_A_UNAUTHORIZED}).
 */
export function createQuotaHook(sequelize: Sequelize, periodSeconds: number): GuardHook {
  const count = createQuotaCounter(sequelize, periodSeconds);
  return async function quotaHook(request, reply) {
    if (!request.user || request.user.quotaLimit === 0) return undefined;
    const credentials = readCredentials(request);
    const outcome = credentials.kind === 'user' ? await count(credentials) : null;
    if (!outcome) return refuse(request, reply, 'unknown_token', LAYOUT_A_UNAUTHORIZED);
    if (outcome.kind === 'unlimited') {
      request.user.quotaLimit = 0;
      return undefined;
    }
    reply.header('RateLimit-Limit', outcome.limit);
    reply.header('RateLimit-Remaining', outcome.limit - outcome.used);
    reply.header('RateLimit-Reset', outcome.resetSeconds);
    if (outcome.kind === 'exceeded') {
      request.log.info({ reason: 'quota_exceeded', userId: outcome.userId }, 'request refused');
      return reply.code(401).header('Retry-After', outcome.resetSeconds).send({ status: 401, message: `Quota exceeded limit: ${outcome.limit}` });
    }
    request.user.quotaLimit = outcome.limit;
    return undefined;
  };
}
