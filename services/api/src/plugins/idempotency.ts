import { createHash } from 'node:crypto';
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest, onSendAsyncHookHandler, preHandlerAsyncHookHandler } from 'fastify';
import { QueryTypes, Sequelize } from 'sequelize';
import { ApiError } from '../errors';
import { rateLimitKey } from './rate-limit';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Honour an `Idempotency-Key` header on this route (DESIGN §12). */
    idempotency?: boolean;
  }
}

/** The 409 message for a key sent again with another request (DESIGN §12). */
export const IDEMPOTENCY_KEY_REUSED = 'Idempotency-Key reused with a different request.';

const HEADER = 'idempotency-key';
const KEY_FORMAT = /^[\x20-\x7e]{1,255}$/;
const KEPT_HOURS = 24;

/** DESIGN §15: a claim whose process died frees its key at most this long after the death. */
export const IDEMPOTENCY_LEASE_MS = 60_000;

export interface IdempotencyOptions {
  sequelize: Sequelize;
  log: FastifyBaseLogger;
  /** How long a duplicate waits for the first request to finish before a 409, ms. Default 10 000. */
  waitMs?: number;
  /** How long a claim holds without renewal, ms; renewed every third of it while the request runs. Default {@link IDEMPOTENCY_LEASE_MS}. */
  leaseMs?: number;
}

type Stored = { status: number; body: string; contentType: string | null };
type Claim =
  | { kind: 'claimed'; committedPostPid: number | null }
  | { kind: 'answered'; response: Stored }
  | { kind: 'running' }
  | { kind: 'mismatch' };

/** Who holds an idempotency key: the principal (`user:<id>` or `key:<id>`) and the key. */
export interface IdempotencyOwner {
  principal: string;
  key: string;
}
type Owner = IdempotencyOwner;

/** The claim a request holds, for the route that runs it. */
export interface IdempotencyClaim extends IdempotencyOwner {
  /**
   * The pid of a post an earlier request with this key created before its process died
   * unanswered: the route answers with that post instead of creating another one.
   */
  committedPostPid: number | null;
}

const claims = new WeakMap<FastifyRequest, IdempotencyClaim>();

/**
 * The Idempotency-Key claim `request` holds, or null (no key, or a route without idempotency).
 * A create passes it to the repository, which records the new post's pid under the key in the
 * statement that creates it.
 */
export function idempotencyClaimOf(request: FastifyRequest): IdempotencyClaim | null {
  return claims.get(request) ?? null;
}

/**
 * Idempotent requests (DESIGN §12; the scheme of Stripe's and the IETF draft
 * draft-ietf-httpapi-idempotency-key-header): on every route registered after this in `scope`
 * with `config: { idempotency: true }`, a request carrying `Idempotency-Key` (1..255 printable
 * ASCII characters, else 400) is run at most once per principal and key for 24 h:
 * - the first claims the key in PostgreSQL (`idempotency_keys`, one INSERT .. ON CONFLICT) before
 *   the handler runs, and its answer (status, body, content type) is stored before it is sent;
 * - the same key with the same method, URL and body gets that answer again, marked
 *   `Idempotent-Replayed: true`, without running the handler;
 * - while the first is still running, a duplicate waits for its answer (never runs beside it);
 * - the same key with another request: 409 {@link IDEMPOTENCY_KEY_REUSED} in the layout's shape.
 * A 5xx answer releases the key, so a retry runs again (the handler made no change). A claim
 * is a lease of `leaseMs` (60 s) that its process renews while the request runs: a process
 * that dies mid-request frees the key within 60 s (DESIGN §15), and the retry then either
 * answers with the post the dead request committed ({@link IdempotencyClaim.committedPostPid})
 * or runs again; it never makes a second post. Runs after validation: a request refused by its
 * schema claims nothing.
 */
export function registerIdempotency(
  scope: FastifyInstance,
  { sequelize, log, waitMs = 10_000, leaseMs = IDEMPOTENCY_LEASE_MS }: IdempotencyOptions,
): void {
  const owners = new WeakMap<FastifyRequest, Owner>();
  const renewals = new WeakMap<FastifyRequest, NodeJS.Timeout>();
  const store = createIdempotencyStore(sequelize, log, leaseMs);
  const stopRenewing = (request: FastifyRequest) => {
    clearInterval(renewals.get(request));
    renewals.delete(request);
  };

  const preHandler: preHandlerAsyncHookHandler = async function idempotencyPreHandler(request: FastifyRequest, reply: FastifyReply) {
    const key = request.headers[HEADER];
    if (key === undefined || !request.principal) return;
    if (typeof key !== 'string' || !KEY_FORMAT.test(key)) throw new ApiError(400, 'Idempotency-Key must be 1 to 255 printable ASCII characters.');
    const owner = { principal: rateLimitKey(request), key };
    const fingerprint = fingerprintOf(request);
    const deadline = Date.now() + waitMs;
    for (;;) {
      const claim = await store.claim(owner, fingerprint);
      if (claim.kind === 'claimed') {
        owners.set(request, owner);
        claims.set(request, { ...owner, committedPostPid: claim.committedPostPid });
        const renewal = setInterval(() => {
          store.renew(owner).catch((err: Error) => request.log.warn({ err }, 'renewing an idempotency key lease failed'));
        }, Math.max(1, Math.floor(leaseMs / 3)));
        renewal.unref();
        renewals.set(request, renewal);
        return;
      }
      if (claim.kind === 'mismatch') throw new ApiError(409, IDEMPOTENCY_KEY_REUSED);
      if (claim.kind === 'answered') {
        const { status, body, contentType } = claim.response;
        if (contentType) reply.type(contentType);
        return reply.code(status).header('Idempotent-Replayed', 'true').send(body);
      }
      if (Date.now() > deadline) {
        // Retry-After tells a client this 409 is worth retrying, unlike a key reused with another request.
        reply.header('Retry-After', '1');
        throw new ApiError(409, 'A request with this Idempotency-Key is still being processed; retry later.');
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };

  const onSend: onSendAsyncHookHandler = async function idempotencyOnSend(request, reply, payload) {
    const owner = owners.get(request);
    if (!owner) return payload;
    owners.delete(request);
    stopRenewing(request);
    const body = typeof payload === 'string' ? payload : Buffer.isBuffer(payload) ? payload.toString('utf8') : payload == null ? '' : null;
    if (reply.statusCode >= 500 || body === null) {
      await store.release(owner).catch((err: Error) => request.log.error({ err }, 'releasing an idempotency key failed'));
      return payload;
    }
    const contentType = reply.getHeader('content-type');
    // Unrecorded, the key stays claimed: retries get 409, never a second run.
    await store
      .answer(owner, { status: reply.statusCode, body, contentType: typeof contentType === 'string' ? contentType : null })
      .catch((err: Error) => request.log.error({ err }, 'recording the answer to an idempotent request failed'));
    return payload;
  };

  scope.addHook('onRoute', (route) => {
    if (!route.config?.idempotency) return;
    route.preHandler = [...asList(route.preHandler), preHandler];
    route.onSend = [...asList(route.onSend), onSend];
  });
}

function asList<T>(hooks: T | T[] | undefined): T[] {
  if (hooks === undefined) return [];
  return Array.isArray(hooks) ? hooks : [hooks];
}

/**
 * sha256 of the method, the URL and the validated body with object keys sorted (so key order
 * and whitespace do not matter); file bytes (multipart images) enter as their own sha256.
 */
function fingerprintOf(request: FastifyRequest): string {
  const hash = createHash('sha256');
  hash.update(`${request.method} ${request.url}\n`);
  hash.update(canonical(request.body));
  return hash.digest('hex');
}

function canonical(value: unknown): string {
  if (Buffer.isBuffer(value)) return `b:${createHash('sha256').update(value).digest('hex')}`;
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.keys(value)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonical((value as Record<string, unknown>)[key])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'undefined';
}

// A key is free when its 24 h are over, or when the request that claimed it stopped renewing
// its lease unanswered (its process died): the same request then takes it over, keeping the
// pid of any post the dead one committed. $4 is the lease in ms.
const CLAIM = `
INSERT INTO idempotency_keys (principal, idempotency_key, fingerprint, expires_at, lease_expires_at)
VALUES ($1, $2, $3, now() + make_interval(hours => ${KEPT_HOURS}), now() + $4 * interval '1 millisecond')
ON CONFLICT (principal, idempotency_key) DO UPDATE
  SET fingerprint = EXCLUDED.fingerprint, response_status = NULL, response_body = NULL,
      response_content_type = NULL, lease_expires_at = EXCLUDED.lease_expires_at,
      post_pid = CASE WHEN idempotency_keys.expires_at <= now() THEN NULL ELSE idempotency_keys.post_pid END,
      created_at = CASE WHEN idempotency_keys.expires_at <= now() THEN now() ELSE idempotency_keys.created_at END,
      expires_at = CASE WHEN idempotency_keys.expires_at <= now() THEN EXCLUDED.expires_at ELSE idempotency_keys.expires_at END
  WHERE idempotency_keys.expires_at <= now()
     OR (idempotency_keys.response_status IS NULL AND idempotency_keys.lease_expires_at <= now()
         AND idempotency_keys.fingerprint = EXCLUDED.fingerprint)
RETURNING post_pid`;

function createIdempotencyStore(sequelize: Sequelize, log: FastifyBaseLogger, leaseMs: number) {
  const query = <T extends object>(sql: string, bind: unknown[]) => sequelize.query<T>(sql, { bind, type: QueryTypes.SELECT });
  let lastPruned = 0;
  const prune = () => {
    if (Date.now() - lastPruned < 3_600_000) return;
    lastPruned = Date.now();
    sequelize
      .query('DELETE FROM idempotency_keys WHERE expires_at <= now()')
      .catch((err: Error) => log.warn({ err }, 'pruning expired idempotency keys failed'));
  };
  return {
    /** Claims the key (an expired one counts as free), or says who holds it. */
    async claim({ principal, key }: Owner, fingerprint: string): Promise<Claim> {
      prune();
      // Concurrent claims serialise on the primary key: exactly one INSERT wins.
      const [claimed] = await query<{ post_pid: number | null }>(CLAIM, [principal, key, fingerprint, leaseMs]);
      if (claimed) return { kind: 'claimed', committedPostPid: claimed.post_pid };
      const [row] = await query<{ fingerprint: string; response_status: number | null; response_body: string | null; response_content_type: string | null }>(
        'SELECT fingerprint, response_status, response_body, response_content_type FROM idempotency_keys WHERE principal = $1 AND idempotency_key = $2',
        [principal, key],
      );
      // Released between the two statements: claim again.
      if (!row) return { kind: 'running' };
      if (row.fingerprint !== fingerprint) return { kind: 'mismatch' };
      if (row.response_status === null) return { kind: 'running' };
      return { kind: 'answered', response: { status: row.response_status, body: row.response_body ?? '', contentType: row.response_content_type } };
    },
    /** Pushes the lease of a claim still running `leaseMs` ahead. */
    async renew({ principal, key }: Owner): Promise<void> {
      await sequelize.query(
        `UPDATE idempotency_keys SET lease_expires_at = now() + $3 * interval '1 millisecond'
          WHERE principal = $1 AND idempotency_key = $2 AND response_status IS NULL`,
        { bind: [principal, key, leaseMs] },
      );
    },
    async answer({ principal, key }: Owner, response: Stored): Promise<void> {
      await sequelize.query(
        'UPDATE idempotency_keys SET response_status = $3, response_body = $4, response_content_type = $5, lease_expires_at = NULL WHERE principal = $1 AND idempotency_key = $2',
        { bind: [principal, key, response.status, response.body, response.contentType] },
      );
    },
    async release({ principal, key }: Owner): Promise<void> {
      await sequelize.query('DELETE FROM idempotency_keys WHERE principal = $1 AND idempotency_key = $2 AND response_status IS NULL', {
        bind: [principal, key],
      });
    },
  };
}
