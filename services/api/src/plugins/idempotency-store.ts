import type { FastifyBaseLogger } from 'fastify';
import { QueryTypes, type Sequelize, type Transaction } from 'sequelize';
import type { IdempotencyOwner, PostIdempotencyClaims } from '../../../../shared/posts/idempotency';

// Every statement on idempotency_keys (docs/design.md §12.1, §15): the plugin's claims and answers, and
// the pid a create records in its post's own commit.

type Owner = IdempotencyOwner;

/** An answer as recorded under a key and replayed: status, body text and content type. */
export type StoredAnswer = { status: number; body: string; contentType: string | null };
type Stored = StoredAnswer;

/** What a claim found: the key is the caller's now, answered, held by a request still running, or another request's. */
export type Claim =
  | { kind: 'claimed'; committedPostPid: number | null }
  | { kind: 'answered'; response: Stored }
  | { kind: 'running'; leaseLeftS: number }
  | { kind: 'mismatch' };

const KEPT_HOURS = 24;

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

// The first answer recorded wins: $3..$5 status, body, content type.
const ANSWER = `UPDATE idempotency_keys SET response_status = $3, response_body = $4, response_content_type = $5, lease_expires_at = NULL
  WHERE principal = $1 AND idempotency_key = $2 AND response_status IS NULL`;

/**
 * The Idempotency-Key rows of one api process: claim, renew, answer, release, with the
 * lease in ms. Expired keys are pruned at most once an hour, in the background.
 */
export function createIdempotencyStore(sequelize: Sequelize, log: FastifyBaseLogger, leaseMs: number) {
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
      const [row] = await query<{
        fingerprint: string;
        response_status: number | null;
        response_body: string | null;
        response_content_type: string | null;
        lease_left_s: number | null;
      }>(
        `SELECT fingerprint, response_status, response_body, response_content_type,
                ceil(extract(epoch FROM lease_expires_at - now()))::int AS lease_left_s
           FROM idempotency_keys WHERE principal = $1 AND idempotency_key = $2`,
        [principal, key],
      );
      // Released between the two statements: claim again.
      if (!row) return { kind: 'running', leaseLeftS: 1 };
      if (row.fingerprint !== fingerprint) return { kind: 'mismatch' };
      if (row.response_status === null) return { kind: 'running', leaseLeftS: Math.max(1, row.lease_left_s ?? 1) };
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
    /** Records the answer sent; one recorded already (in the request's own commit, or another's) stays. */
    async answer({ principal, key }: Owner, response: Stored): Promise<void> {
      await sequelize.query(ANSWER, { bind: [principal, key, response.status, response.body, response.contentType] });
    },
    /**
     * Records the answer inside `transaction`, the one that commits what the request made.
     * @returns false when another request with the key answered first (the caller rolls back)
     */
    async answerInCommit({ principal, key }: Owner, response: Stored, transaction: Transaction): Promise<boolean> {
      const [, updated] = await sequelize.query(ANSWER, {
        bind: [principal, key, response.status, response.body, response.contentType],
        type: QueryTypes.UPDATE,
        transaction,
      });
      return updated > 0;
    },
    /** Frees a key whose request committed nothing it records: no answer, no post. */
    async release({ principal, key }: Owner): Promise<void> {
      await sequelize.query(
        'DELETE FROM idempotency_keys WHERE principal = $1 AND idempotency_key = $2 AND response_status IS NULL AND post_pid IS NULL',
        { bind: [principal, key] },
      );
    },
  };
}

/**
 * The posts module's port onto `idempotency_keys` (shared/posts/idempotency.ts): the SQL a
 * batch of creates runs to link each post to its request's key in the post's own commit.
 */
export const postIdempotencyClaims: PostIdempotencyClaims = {
  recordPidsSql: (rows, columns) => `UPDATE idempotency_keys k SET post_pid = ${columns.pid}
        FROM ${rows}
       WHERE k.principal = ${columns.principal} AND k.idempotency_key = ${columns.key} AND k.post_pid IS NULL`,
  lockSql: (input) => `SELECT i.ord, k.post_pid FROM ${input} i
       CROSS JOIN LATERAL (
         SELECT post_pid FROM idempotency_keys k
          WHERE k.principal = i.claim_principal AND k.idempotency_key = i.claim_key
            FOR UPDATE
       ) k`,
  recordedPostsSql: (columns) => `SELECT c.principal, c.key, k.post_pid, ${columns}
      FROM unnest($1::text[], $2::text[]) AS c(principal, key)
      JOIN idempotency_keys k ON k.principal = c.principal AND k.idempotency_key = c.key AND k.post_pid IS NOT NULL
      LEFT JOIN posts p ON p.pid = k.post_pid`,
};
