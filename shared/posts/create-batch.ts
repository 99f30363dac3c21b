import { randomInt, randomUUID } from 'node:crypto';
import type { Sequelize } from 'sequelize';
import { isOutcomeUnknown } from '../db';
import type { Settled } from '../db/group-commit';
import { rawQuery } from '../db/raw-query';
import { eventEnvelopeSql, isoJsonSql, jsonObjectSql, jsonTextSql } from '../deliveries/envelope-sql';
import { eventRowsClauses, type FannedOutEvent, jobsOfEvent } from '../deliveries/event-rows';
import type { JobToAdd } from '../queue/webhook-queue';
import { PostIdsExhaustedError, RecordedPostGoneError } from './errors';
import type { IdempotencyOwner, PostIdempotencyClaims } from './idempotency';
import { POST_COLUMNS, PostRecord, PostRow, toPostRecord } from './post-record';

export interface NewPost {
  userId: number;
  title: string;
  content: string;
  image: string | null;
}

/** How a new post gets its pid: Layout A from the table's sequence (>= 100000), Layout B a random 10000..99999. */
export type PidSource = 'sequence' | 'random';

/** One create of a batch. */
export interface PostCreate {
  post: NewPost;
  /** The creating request's trace, carried by its outbox rows. */
  traceparent: string | null;
  /** The request's Idempotency-Key, whose row records the new pid in the same commit; null without one. */
  claim: IdempotencyOwner | null;
}

/** A create's result. */
export interface CreatedPost {
  record: PostRecord;
  /**
   * The jobs of the post's `post.created` outbox rows, committed with it, to add now; none
   * when nobody subscribes or the post is the one the request's Idempotency-Key recorded.
   */
  jobs: JobToAdd[];
}

/**
 * Writes a batch of creates, each post committed with its `post.created` outbox rows and the
 * pid recorded under its Idempotency-Key (docs/design.md §6.1, §15).
 *
 * @returns one outcome per create, in order: its post, or the error only it gets:
 *   PostIdsExhaustedError when no free random pid was found, RecordedPostGoneError when its
 *   key records a post that no longer exists, or the database's error
 */
export type CreateBatch = (creates: readonly PostCreate[], pidSource: PidSource) => Promise<Settled<CreatedPost>[]>;

const RANDOM_PID_MIN = 10_000;
const RANDOM_PID_MAX = 99_999;
// 90 000 slots: ten misses in a row means the range is nearly full, not bad luck.
const RANDOM_PID_ATTEMPTS = 10;
/** Random pids drawn per post and attempt of a one-statement batch; see createBatchSql. */
const PID_CANDIDATES = 4;

/**
 * The `post.created` envelope of the inserted row `p` (docs/design.md §6.1, the keys of
 * post-record.ts toChangedData in its order), written by PostgreSQL: its pid and times are
 * known only once the insert ran, and the body is the row as stored.
 */
const createdEnvelopeSql = (p: string, event: string): string =>
  eventEnvelopeSql(
    event,
    jsonObjectSql([
      ['pid', `${p}.pid::text`],
      ['uuid', jsonTextSql(`${p}.post_uuid`)],
      ['user_id', `${p}.user_id::text`],
      ['title', jsonTextSql(`${p}.post_title`)],
      ['content', jsonTextSql(`${p}.post_body`)],
      ['image', jsonTextSql(`${p}.post_image`)],
      ['created_at', isoJsonSql(`${p}.created_at`)],
      ['updated_at', isoJsonSql(`${p}.updated_at`)],
    ]),
  );

/**
 * A batch of creates with their `post.created` outbox rows in one statement: $1..$5 the posts'
 * uuid, user_id, title, body, image; $6 each request's traceparent; $7 the event; $8 (random)
 * the candidate pids, {@link PID_CANDIDATES} per post in a row; then the Idempotency-Key claims
 * (principal, key; null without one). Each outbox body is the envelope of its stored row,
 * written in the statement ({@link createdEnvelopeSql}).
 *
 * A random pid is the first of its post's candidates that no stored post holds: each attempt
 * is its own commit, so a retry costs a round trip and a commit where it cost one statement
 * inside a transaction, and a table filling up must not make most batches retry. The first
 * free one of independent uniform draws is a uniform draw among the free pids. Posts with no
 * free candidate, or whose pid another post of the batch or another writer took meanwhile
 * (ON CONFLICT), are left out and retried. A post whose Idempotency-Key records a post
 * already, or whose key an earlier post of the batch holds, is left out too: it is answered
 * with the recorded post.
 */
export function createBatchSql(pidSource: PidSource, claims: PostIdempotencyClaims): string {
  const random = pidSource === 'random';
  const pid = random ? ', pid' : '';
  const claimParams = random ? '$9::text[], $10::text[]' : '$8::text[], $9::text[]';
  // One probe of the primary key per candidate, written out: over a set (unnest) the planner
  // may hash the whole posts table instead, at a cost that grows with the table. OFFSET 0
  // keeps each NOT EXISTS a probe: PostgreSQL may otherwise turn it into a hashed subplan that
  // reads every post, which a generic plan made while the table was small would keep doing.
  const candidate = (k: number) => `($8::int[])[(${PID_CANDIDATES} * (ord - 1) + ${k})::int]`;
  const firstFree = Array.from(
    { length: PID_CANDIDATES },
    (_, k) => `WHEN NOT EXISTS (SELECT 1 FROM posts stored WHERE stored.pid = ${candidate(k + 1)} OFFSET 0) THEN ${candidate(k + 1)}`,
  );
  return `WITH input AS (
      SELECT * FROM unnest($1::uuid[], $2::int[], $3::text[], $4::text[], $5::text[], $6::text[], ${claimParams})
        WITH ORDINALITY AS i(post_uuid, user_id, post_title, post_body, post_image, traceparent, claim_principal, claim_key, ord)
    ), claims AS (
      -- Before the insert: a key taken over after its lease lapsed, whose other holder recorded a post, gets none.
      ${claims.lockSql('input')}
    ), inserted AS (
      INSERT INTO posts (post_uuid, user_id, post_title, post_body, post_image${pid})
      SELECT * FROM (
        SELECT post_uuid, user_id, post_title, post_body, post_image${
          random
            ? `,
               CASE ${firstFree.join(' ')} END AS pid`
            : ''
        }
          FROM input
         WHERE NOT EXISTS (SELECT 1 FROM claims c WHERE c.ord = input.ord AND c.post_pid IS NOT NULL)
           -- Two requests of one key in one batch: the first makes the post.
           AND NOT EXISTS (SELECT 1 FROM input earlier
                            WHERE earlier.claim_principal = input.claim_principal AND earlier.claim_key = input.claim_key AND earlier.ord < input.ord)
      ) chosen
      ${random ? 'WHERE pid IS NOT NULL ON CONFLICT (pid) DO NOTHING' : ''}
      RETURNING ${POST_COLUMNS}
    ), claimed AS (
      -- The request's Idempotency-Key learns the pid in the post's own commit (docs/design.md §15).
      ${claims.recordPidsSql('inserted p JOIN input i ON i.post_uuid = p.post_uuid', { pid: 'p.pid', principal: 'i.claim_principal', key: 'i.claim_key' })}
    ), source AS (
      SELECT i.ord, 'post'::text AS kind, $7::text AS event, p.user_id AS owner_id, NULL::int AS about_id, i.traceparent,
             ${createdEnvelopeSql('p', '$7::text')} AS body
        FROM inserted p JOIN input i ON i.post_uuid = p.post_uuid
    ), ${eventRowsClauses()}
    SELECT p.*, f.delivery_ids, f.endpoint_ids
      FROM inserted p JOIN input i ON i.post_uuid = p.post_uuid LEFT JOIN fan_by_event f ON f.ord = i.ord`;
}

/**
 * The batch writer: each attempt one statement on a pooled connection, past Sequelize's
 * pipeline, so each attempt is atomic without BEGIN/COMMIT round trips. Its generic plan
 * (shared/db: every connection plans once) probes the primary key once per pid candidate,
 * whatever the batch's size and the table's statistics, so it stays flat as the posts table
 * grows. A random pid that collided is tried again with the posts still missing. Should an
 * attempt fail, each post still missing is tried alone, so one post's error (a user deleted
 * meanwhile) reaches only its own create; never when the outcome is unknown (the connection
 * lost with the statement unanswered): that attempt may have committed, and tried again post
 * by post it would write each post twice.
 */
export function createBatchWriter({ sequelize, claims }: { sequelize: Sequelize; claims: PostIdempotencyClaims }): CreateBatch {
  // Prepared on each connection: parsing and planning this statement cost more than running it for a small batch.
  const statements: Record<PidSource, { name: string; text: string }> = {
    sequence: { name: 'posts-create-sequence', text: createBatchSql('sequence', claims) },
    random: { name: 'posts-create-random', text: createBatchSql('random', claims) },
  };
  // The posts' Idempotency-Keys record, for creates the batch statement left out.
  const recordedPosts = { name: 'posts-recorded-by-keys', text: claims.recordedPostsSql(POST_COLUMNS.split(', ').map((column) => `p.${column}`).join(', ')) };

  async function write(items: readonly PostCreate[], pidSource: PidSource): Promise<Settled<CreatedPost>[]> {
    const uuids = items.map(() => randomUUID());
    const position = new Map<string, number>(uuids.map((uuid, index) => [uuid, index]));
    const outcomes: Settled<CreatedPost>[] = new Array(items.length);
    const random = pidSource === 'random';
    let missing = items.map((_, index) => index);
    for (let attempt = 0; attempt < (random ? RANDOM_PID_ATTEMPTS : 1) && missing.length > 0; attempt++) {
      const column = <T>(pick: (index: number) => T) => missing.map(pick);
      const values = [
        column((i) => uuids[i]),
        column((i) => items[i].post.userId),
        column((i) => items[i].post.title),
        column((i) => items[i].post.content),
        column((i) => items[i].post.image),
        column((i) => items[i].traceparent),
        'post.created',
        ...(random ? [missing.flatMap(() => Array.from({ length: PID_CANDIDATES }, () => randomInt(RANDOM_PID_MIN, RANDOM_PID_MAX + 1)))] : []),
        column((i) => items[i].claim?.principal ?? null),
        column((i) => items[i].claim?.key ?? null),
      ];
      let found: (PostRow & FannedOutEvent)[];
      try {
        found = await rawQuery<PostRow & FannedOutEvent>(sequelize, { ...statements[pidSource], values });
      } catch (error) {
        // Alone already, or perhaps committed: the error is the answer. Otherwise each post
        // still missing is tried alone (the earlier attempts' posts are committed).
        const alone = isOutcomeUnknown(error) || (attempt === 0 && items.length === 1)
          ? missing.map((): Settled<CreatedPost> => ({ ok: false, error }))
          : await Promise.all(missing.map(async (index) => (await write([items[index]], pidSource))[0]));
        missing.forEach((index, n) => (outcomes[index] = alone[n]));
        return outcomes;
      }
      found.forEach((row) => {
        outcomes[position.get(row.post_uuid)!] = { ok: true, value: { record: toPostRecord(row), jobs: jobsOfEvent(row) } };
      });
      missing = await answerRecorded(items, missing.filter((index) => outcomes[index] === undefined), outcomes);
    }
    for (const index of missing) outcomes[index] = { ok: false, error: new PostIdsExhaustedError(RANDOM_PID_ATTEMPTS) };
    return outcomes;
  }

  /**
   * Answers each create of `missing` whose Idempotency-Key records a post (another holder of
   * the key made it) with that post, or a {@link RecordedPostGoneError}; after a commit, so it
   * never throws: should the look-up fail, those creates fail with its error.
   * @returns the creates still missing
   */
  async function answerRecorded(items: readonly PostCreate[], missing: number[], outcomes: Settled<CreatedPost>[]): Promise<number[]> {
    const claimed = missing.filter((index) => items[index].claim !== null);
    if (claimed.length === 0) return missing;
    const keyOf = (claim: IdempotencyOwner) => JSON.stringify([claim.principal, claim.key]);
    try {
      const values = [claimed.map((index) => items[index].claim!.principal), claimed.map((index) => items[index].claim!.key)];
      const recorded = await rawQuery<PostRow & { principal: string; key: string; post_pid: number }>(sequelize, { ...recordedPosts, values });
      const byKey = new Map(recorded.map((row) => [keyOf({ principal: row.principal, key: row.key }), row]));
      for (const index of claimed) {
        const row = byKey.get(keyOf(items[index].claim!));
        if (row === undefined) continue;
        outcomes[index] = row.pid === null ? { ok: false, error: new RecordedPostGoneError(row.post_pid) } : { ok: true, value: { record: toPostRecord(row), jobs: [] } };
      }
    } catch (error) {
      for (const index of claimed) outcomes[index] = { ok: false, error };
    }
    return missing.filter((index) => outcomes[index] === undefined);
  }

  return write;
}
