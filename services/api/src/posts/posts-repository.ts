import { randomInt, randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import type { FastifyBaseLogger } from 'fastify';
import { QueryTypes, Sequelize, Transaction } from 'sequelize';
import { PostIdsExhaustedError, RecordedPostGoneError } from './errors';
import type { PostCache } from './post-cache';
import { activeTraceparent, annotateActiveSpan, WEBHOOK_EVENT, WEBHOOK_IDS } from '../../../../shared/tracing';
import { isOutcomeUnknown } from '../../../../shared/db';
import { createGroupCommit, GroupCommit, Settled } from '../../../../shared/db/group-commit';
import { rawQuery } from '../../../../shared/db/raw-query';
import { isoJsonSql, joinEnvelopeSql, splitEnvelope } from '../../../../shared/deliveries/envelope-pieces';
import { FannedOutEvent, fanOutClauses, jobsOfEvent } from '../../../../shared/deliveries/fan-out';
import { IdempotencyOwner, lockClaimsSql, recordedPostsSql, recordPostPidsSql } from '../plugins/idempotency-store';
import type { PostEventRecorder } from './post-events';
import { isStorablePid, POST_COLUMNS, PostRecord, PostRow, toChangedData, toDeletedData, toPostRecord } from './post-record';

export interface NewPost {
  userId: number;
  title: string;
  content: string;
  image: string | null;
}

export interface PostChanges {
  title?: string;
  content?: string;
}

/** How a new post gets its pid: Layout A from the table's sequence (>= 100000), Layout B a random 10000..99999. */
export type PidSource = 'sequence' | 'random';

export interface PostPage {
  posts: PostRecord[];
}

/** Layout B's list answer (docs/design.md §5) as PostgreSQL wrote it, with the number of posts, both of one snapshot. */
export interface LayoutBPage {
  /**
   * The JSON array of the page's posts, `[{"pid","title","content","created_at","updated_at"}]`,
   * pid a string, times as toISOString writes them. A page holding more than
   * {@link LAYOUT_B_WHOLE_PAGE_BYTES} of text is a stream of that text instead, read in chunks
   * of {@link LAYOUT_B_CHUNK_POSTS} posts as it is sent.
   */
  json: string | Readable;
  /** Every post in the table, not only this page's. */
  total: number;
}

/** The one posts store both layouts use. Writes are transactional, record a post event and invalidate the cache. */
export interface PostsRepository {
  /**
   * @param claim - the request's Idempotency-Key, whose row records the new pid in the same
   *   commit (docs/design.md §15). A key that records a post already (another holder made it,
   *   the key having been taken over after a lease lapsed) gets no second post: the recorded
   *   post is returned.
   * @throws PostIdsExhaustedError when no free random pid was found
   * @throws RecordedPostGoneError when the key records a post that no longer exists
   */
  create(post: NewPost, pidSource: PidSource, claim?: IdempotencyOwner | null): Promise<PostRecord>;
  findById(pid: number): Promise<PostRecord | null>;
  /** Newest first; one page read through the created_at index. */
  list(limit: number, offset: number): Promise<PostPage>;
  /**
   * Layout B's page, newest first, as its JSON body and the exact number of posts, in one
   * statement: the count is the sum of `posts_count`'s shards, which the posts' own writes
   * keep in their transaction, so the page and its total come from one snapshot and no page
   * scans the table; PostgreSQL writes the body, so no row is parsed into objects here.
   * A page of more than {@link LAYOUT_B_WHOLE_PAGE_BYTES} of text (up to 1000 posts of 65,535
   * characters) is not built whole, neither in PostgreSQL nor here: it is streamed in chunks
   * of {@link LAYOUT_B_CHUNK_POSTS} posts, each chunk its own statement continuing after the
   * last post sent (each post once, in order; the total is the first statement's).
   * @returns null when the page holds no post
   */
  listLayoutB(limit: number, offset: number): Promise<LayoutBPage | null>;
  /** Null when the post does not exist or belongs to another user. */
  update(pid: number, ownerId: number, changes: PostChanges): Promise<PostRecord | null>;
  /** The deleted post; null when it does not exist or belongs to another user. */
  delete(pid: number, ownerId: number): Promise<PostRecord | null>;
  /**
   * Deletes every post of `ownerId` inside the caller's `transaction` (a user being deleted),
   * recording a `post.deleted` event for each in that transaction. The cache and the image
   * files are left alone until the caller's commit: pass the result to {@link forgetDeleted}
   * then, and only then (a rollback must keep the posts' images).
   * @returns the deleted posts, none when the user had none
   */
  deleteAllByOwner(ownerId: number, transaction: Transaction): Promise<PostRecord[]>;
  /**
   * After the deletion committed: drops the posts from the cache and removes their image
   * files. Never throws: failures are logged (the cache TTL bounds a missed invalidation).
   */
  forgetDeleted(posts: readonly PostRecord[]): Promise<void>;
}

export interface PostsRepositoryDeps {
  sequelize: Sequelize;
  events: PostEventRecorder;
  cache: PostCache;
  /** Removes a deleted post's image file; failures are logged, never surfaced. */
  removeImage(name: string): Promise<void>;
  log: FastifyBaseLogger;
}

/** A create waiting for its group-commit batch. */
interface PendingCreate {
  post: NewPost;
  traceparent: string | null;
  claim: IdempotencyOwner | null;
}

interface CreatedPost {
  record: PostRecord;
  deliveryIds: string[];
}

const RANDOM_PID_MIN = 10_000;
const RANDOM_PID_MAX = 99_999;
// 90 000 slots: ten misses in a row means the range is nearly full, not bad luck.
const RANDOM_PID_ATTEMPTS = 10;
/** Random pids drawn per post and attempt of a one-statement batch; see createStatement. */
const PID_CANDIDATES = 4;

/** The outbox body's values only PostgreSQL knows until the insert runs, in their order in the event data. */
const ENVELOPE_HOLES = ['pid', 'created_at', 'updated_at'];

/**
 * A batch of creates with their `post.created` outbox rows in one statement: $1..$5 the posts'
 * uuid, user_id, title, body, image; $6..$9 the pieces of each envelope around pid, created_at
 * and updated_at; $10 each request's traceparent; $11 the event; $12 (random) the candidate
 * pids, {@link PID_CANDIDATES} per post in a row.
 *
 * A random pid is the first of its post's candidates that no stored post holds: each attempt
 * is its own commit, so a retry costs a round trip and a commit where it cost one statement
 * inside a transaction, and a table filling up must not make most batches retry. The first
 * free one of independent uniform draws is a uniform draw among the free pids. Posts with no
 * free candidate, or whose pid another post of the batch or another writer took meanwhile
 * (ON CONFLICT), are left out and retried by the caller A post whose Idempotency-Key records a
 * post already, or whose key an earlier post of the batch holds, is left out too: the caller
 * answers it with the recorded post.
 */
function createStatement(random: boolean): string {
  const pid = random ? ', pid' : '';
  // The Idempotency-Key claims (principal, key; null without one) follow the pid candidates.
  const claims = random ? '$13::text[], $14::text[]' : '$12::text[], $13::text[]';
  // One probe of the primary key per candidate, written out: over a set (unnest) the planner
  // may hash the whole posts table instead, at a cost that grows with the table. OFFSET 0
  // keeps each NOT EXISTS a probe: PostgreSQL may otherwise turn it into a hashed subplan that
  // reads every post, which a generic plan made while the table was small would keep doing.
  const candidate = (k: number) => `($12::int[])[(${PID_CANDIDATES} * (ord - 1) + ${k})::int]`;
  const firstFree = Array.from(
    { length: PID_CANDIDATES },
    (_, k) => `WHEN NOT EXISTS (SELECT 1 FROM posts stored WHERE stored.pid = ${candidate(k + 1)} OFFSET 0) THEN ${candidate(k + 1)}`,
  );
  return `WITH input AS (
      SELECT * FROM unnest($1::uuid[], $2::int[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], ${claims})
        WITH ORDINALITY AS i(post_uuid, user_id, post_title, post_body, post_image, piece0, piece1, piece2, piece3, traceparent, claim_principal, claim_key, ord)
    ), claims AS (
      -- Before the insert: a key taken over after its lease lapsed, whose other holder recorded a post, gets none.
      ${lockClaimsSql('input')}
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
      ${recordPostPidsSql('inserted p JOIN input i ON i.post_uuid = p.post_uuid', { pid: 'p.pid', principal: 'i.claim_principal', key: 'i.claim_key' })}
    ), source AS (
      SELECT i.ord, p.user_id AS owner_id, i.traceparent,
             ${joinEnvelopeSql(['i.piece0', 'i.piece1', 'i.piece2', 'i.piece3'], ['p.pid::text', isoJsonSql('p.created_at'), isoJsonSql('p.updated_at')])} AS body
        FROM inserted p JOIN input i ON i.post_uuid = p.post_uuid
    ), ${fanOutClauses('$11::text')}
    SELECT p.*, f.delivery_ids, f.endpoint_ids
      FROM inserted p JOIN input i ON i.post_uuid = p.post_uuid LEFT JOIN fan_by_event f ON f.ord = i.ord`;
}
// Prepared on each connection: parsing and planning this statement cost more than running it
// for a small batch. Its generic plan (shared/db: every connection plans once) probes the
// primary key once per pid candidate (written out above), whatever the batch's size and the
// table's statistics, so it stays flat as the posts table grows.
const CREATE_WITH_SEQUENCE_PIDS = { name: 'posts-create-sequence', text: createStatement(false) };
const CREATE_WITH_RANDOM_PIDS = { name: 'posts-create-random', text: createStatement(true) };

/** A timestamp column as toISOString writes it (milliseconds truncated, as node-postgres reads them), an SQL text expression. */
const isoTextSql = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
/** Layout B's post object (docs/design.md §5) of the posts row `p`, a FROM item. */
const layoutBPostSql = `CROSS JOIN LATERAL (
     SELECT p.pid::text AS pid, p.post_title AS title, p.post_body AS content,
            ${isoTextSql('p.created_at')} AS created_at, ${isoTextSql('p.updated_at')} AS updated_at
   ) b`;

/** The most text (titles and contents, UTF-8) a Layout B page is built of in one piece, bytes. */
export const LAYOUT_B_WHOLE_PAGE_BYTES = 1024 * 1024;
/** Posts per chunk of a Layout B page streamed in chunks: 16 posts of 65,535 characters stay a few MB, escaped. */
export const LAYOUT_B_CHUNK_POSTS = 16;

/**
 * Layout B's page as JSON text (docs/design.md §5), its number of posts and the number of all
 * posts: row_to_json writes compact JSON in the schema's key order and escapes strings as
 * JSON.stringify does (quote, backslash, control characters; PostgreSQL text holds no lone
 * surrogate). $1 limit, $2 offset, $3 {@link LAYOUT_B_WHOLE_PAGE_BYTES}: a page with more
 * text is only counted (its json null), its size read from the values' headers (octet_length
 * reads no TOASTed value). The aggregate returns one row also for an empty page, count 0.
 */
const LIST_LAYOUT_B_SQL = `SELECT '[' || string_agg(row_to_json(b)::text, ',' ORDER BY p.created_at DESC, p.pid DESC) FILTER (WHERE p.text_bytes <= $3) || ']' AS json,
         count(*)::int AS count,
         (SELECT sum(n) FROM posts_count) AS total
    FROM (SELECT l.*, sum(octet_length(l.post_title) + octet_length(l.post_body)) OVER () AS text_bytes
            FROM (SELECT pid, post_title, post_body, created_at, updated_at FROM posts ORDER BY created_at DESC, pid DESC LIMIT $1 OFFSET $2) l) p
   ${layoutBPostSql}`;

/**
 * One chunk of a Layout B page streamed in chunks: the posts after the post (`$3` created_at
 * as text, `$4` pid; 'infinity' and 0 for the first chunk), newest first, skipping `$2` and
 * taking `$1`, each as its JSON object, with its own position for the next chunk.
 */
const LAYOUT_B_CHUNK_SQL = `SELECT row_to_json(b)::text AS json, p.created_at::text AS after_at, p.pid AS after_pid
    FROM (SELECT pid, post_title, post_body, created_at, updated_at FROM posts
           WHERE (created_at, pid) < ($3::timestamptz, $4::int)
           ORDER BY created_at DESC, pid DESC LIMIT $1 OFFSET $2) p
   ${layoutBPostSql}
   ORDER BY p.created_at DESC, p.pid DESC`;

// The posts' Idempotency-Keys record, for creates the batch statement left out.
const RECORDED_POSTS = { name: 'posts-recorded-by-keys', text: recordedPostsSql(POST_COLUMNS.split(', ').map((column) => `p.${column}`).join(', ')) };

/** The SQL of a batch of creates ({@link createStatement}), for tests of its plan. */
export const createPostsSql = (pidSource: PidSource): string => (pidSource === 'random' ? CREATE_WITH_RANDOM_PIDS : CREATE_WITH_SEQUENCE_PIDS).text;

export function createPostsRepository({ sequelize, events, cache, removeImage, log }: PostsRepositoryDeps): PostsRepository {
  async function rows(sql: string, bind: unknown[], transaction?: Transaction): Promise<PostRow[]> {
    return sequelize.query<PostRow>(sql, { bind, type: QueryTypes.SELECT, raw: true, transaction });
  }

  /**
   * The batch as one statement per attempt on a pooled connection, past Sequelize's pipeline:
   * the posts and their outbox rows together (shared/deliveries `fanOutClauses`), so each attempt is
   * atomic without BEGIN/COMMIT round trips. The outbox bodies are serialised here around the
   * values PostgreSQL gives (pid, created_at, updated_at). Each attempt's jobs are added once it
   * committed. A random pid that collided is retried with the posts still missing.
   *
   * @throws the first attempt's error (nothing of the batch was written)
   */
  async function writeBatch(items: PendingCreate[], pidSource: PidSource): Promise<Settled<CreatedPost>[]> {
    const uuids = items.map(() => randomUUID());
    const pieces = items.map(({ post }, index) => {
      const shape = toChangedData({ pid: 0, uuid: uuids[index], userId: post.userId, title: post.title, content: post.content, image: post.image, createdAt: '', updatedAt: '' });
      return splitEnvelope({ ...shape }, 'post.created', ENVELOPE_HOLES);
    });
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
        ...[0, 1, 2, 3].map((n) => column((i) => pieces[i][n])),
        column((i) => items[i].traceparent),
        'post.created',
        ...(random ? [missing.flatMap(() => Array.from({ length: PID_CANDIDATES }, () => randomInt(RANDOM_PID_MIN, RANDOM_PID_MAX + 1)))] : []),
        column((i) => items[i].claim?.principal ?? null),
        column((i) => items[i].claim?.key ?? null),
      ];
      let found: (PostRow & FannedOutEvent)[];
      try {
        found = await rawQuery<PostRow & FannedOutEvent>(sequelize, { ...(random ? CREATE_WITH_RANDOM_PIDS : CREATE_WITH_SEQUENCE_PIDS), values });
      } catch (error) {
        if (attempt === 0) throw error;
        if (isOutcomeUnknown(error)) {
          // This attempt may have committed (its answer was lost): none of it is tried again.
          for (const index of missing) outcomes[index] = { ok: false, error };
          return outcomes;
        }
        // The earlier attempts' posts are committed: each post still missing is tried alone.
        const alone = await Promise.all(
          missing.map((index) => createBatch([items[index]], pidSource).then(([outcome]) => outcome, (failure: unknown): Settled<CreatedPost> => ({ ok: false, error: failure }))),
        );
        missing.forEach((index, n) => (outcomes[index] = alone[n]));
        return outcomes;
      }
      const jobs = found.map(jobsOfEvent);
      found.forEach((row, n) => {
        outcomes[position.get(row.post_uuid)!] = { ok: true, value: { record: toPostRecord(row), deliveryIds: jobs[n].map((job) => job.deliveryId) } };
      });
      events.queueCommitted(jobs.flat());
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
  async function answerRecorded(items: PendingCreate[], missing: number[], outcomes: Settled<CreatedPost>[]): Promise<number[]> {
    const claimed = missing.filter((index) => items[index].claim !== null);
    if (claimed.length === 0) return missing;
    const keyOf = (claim: IdempotencyOwner) => JSON.stringify([claim.principal, claim.key]);
    try {
      const values = [claimed.map((index) => items[index].claim!.principal), claimed.map((index) => items[index].claim!.key)];
      const recorded = await rawQuery<PostRow & { principal: string; key: string; post_pid: number }>(sequelize, { ...RECORDED_POSTS, values });
      const byKey = new Map(recorded.map((row) => [keyOf({ principal: row.principal, key: row.key }), row]));
      for (const index of claimed) {
        const row = byKey.get(keyOf(items[index].claim!));
        if (row === undefined) continue;
        outcomes[index] = row.pid === null ? { ok: false, error: new RecordedPostGoneError(row.post_pid) } : { ok: true, value: { record: toPostRecord(row), deliveryIds: [] } };
      }
    } catch (error) {
      for (const index of claimed) outcomes[index] = { ok: false, error };
    }
    return missing.filter((index) => outcomes[index] === undefined);
  }

  /**
   * One group-commit batch of creates: the posts and their outbox rows committed together.
   * Should the batch fail, the group commit tries each post alone (`retryAlone`), so one
   * post's error (a user deleted meanwhile) reaches only its own request.
   * @throws the batch's error, when nothing of it was written
   */
  async function createBatch(items: PendingCreate[], pidSource: PidSource): Promise<Settled<CreatedPost>[]> {
    const outcomes = await writeBatch(items, pidSource);
    // One invalidation for the batch (it never throws), before any of its requests is answered.
    const pids = outcomes.flatMap((outcome) => (outcome.ok ? [outcome.value.record.pid] : []));
    if (pids.length > 0) await cache.invalidate(pids);
    return outcomes;
  }

  // A batch whose outcome is unknown (the connection lost with its statement unanswered) may
  // have committed: tried again post by post, it would write each post twice.
  const retryAlone = (error: unknown) => !isOutcomeUnknown(error);
  const creates: Record<PidSource, GroupCommit<PendingCreate, CreatedPost>> = {
    sequence: createGroupCommit((items) => createBatch(items, 'sequence'), { retryAlone }),
    random: createGroupCommit((items) => createBatch(items, 'random'), { retryAlone }),
  };

  /** The JSON text of a Layout B page of `count` posts from `offset`, a chunk of posts at a time, as it is read. */
  async function* layoutBChunks(count: number, offset: number): AsyncGenerator<string> {
    yield '[';
    let after = { at: 'infinity', pid: 0 };
    let skip = offset;
    for (let sent = 0; sent < count; ) {
      const size = Math.min(LAYOUT_B_CHUNK_POSTS, count - sent);
      const chunk = await rawQuery<{ json: string; after_at: string; after_pid: number }>(sequelize, {
        name: 'posts-list-layout-b-chunk',
        text: LAYOUT_B_CHUNK_SQL,
        values: [size, skip, after.at, after.pid],
      });
      if (chunk.length === 0) break;
      yield (sent === 0 ? '' : ',') + chunk.map((post) => post.json).join(',');
      sent += chunk.length;
      if (chunk.length < size) break;
      const last = chunk[chunk.length - 1];
      after = { at: last.after_at, pid: last.after_pid };
      skip = 0;
    }
    yield ']';
  }

  async function forgetDeleted(posts: readonly PostRecord[]): Promise<void> {
    for (const post of posts) {
      await cache.invalidate(post.pid);
      if (post.image) {
        const image = post.image;
        await removeImage(image).catch((err) => log.warn({ err, pid: post.pid, image }, 'removing a deleted post image failed'));
      }
    }
  }

  return {
    async create(post, pidSource, claim = null) {
      // Concurrent creates share one transaction (group commit); the trace of each request travels with its own rows.
      const { record, deliveryIds } = await creates[pidSource].submit({ post, traceparent: activeTraceparent(), claim });
      annotateActiveSpan({ [WEBHOOK_EVENT]: 'post.created', [WEBHOOK_IDS]: deliveryIds });
      return record;
    },

    // The reads are the hot paths: prepared statements on a pooled connection, past Sequelize's pipeline.
    async findById(pid) {
      if (!isStorablePid(pid)) return null;
      const [row] = await rawQuery<PostRow>(sequelize, { name: 'posts-find-by-id', text: `SELECT ${POST_COLUMNS} FROM posts WHERE pid = $1`, values: [pid] });
      return row ? toPostRecord(row) : null;
    },

    async list(limit, offset) {
      // No window count here: `count(*) OVER ()` makes PostgreSQL read and sort the whole table per page.
      const found = await rawQuery<PostRow>(sequelize, {
        name: 'posts-list',
        text: `SELECT ${POST_COLUMNS} FROM posts ORDER BY created_at DESC, pid DESC LIMIT $1 OFFSET $2`,
        values: [limit, offset],
      });
      return { posts: found.map(toPostRecord) };
    },

    async listLayoutB(limit, offset) {
      const [row] = await rawQuery<{ json: string | null; count: number; total: string }>(sequelize, {
        name: 'posts-list-layout-b',
        text: LIST_LAYOUT_B_SQL,
        values: [limit, offset, LAYOUT_B_WHOLE_PAGE_BYTES],
      });
      if (row.count === 0) return null;
      const json = row.json ?? Readable.from(layoutBChunks(row.count, offset), { objectMode: false });
      return { json, total: Number(row.total) };
    },

    async update(pid, ownerId, changes) {
      if (!isStorablePid(pid)) return null;
      const updated = await sequelize.transaction(async (transaction) => {
        const [row] = await rows(
          `UPDATE posts SET post_title = COALESCE($3, post_title), post_body = COALESCE($4, post_body), updated_at = now()
           WHERE pid = $1 AND user_id = $2 RETURNING ${POST_COLUMNS}`,
          [pid, ownerId, changes.title ?? null, changes.content ?? null],
          transaction,
        );
        if (!row) return null;
        const record = toPostRecord(row);
        await events.record(transaction, 'post.updated', toChangedData(record));
        return record;
      });
      if (updated) await cache.invalidate(pid);
      return updated;
    },

    async delete(pid, ownerId) {
      if (!isStorablePid(pid)) return null;
      const deleted = await sequelize.transaction(async (transaction) => {
        const [row] = await rows(`DELETE FROM posts WHERE pid = $1 AND user_id = $2 RETURNING ${POST_COLUMNS}`, [pid, ownerId], transaction);
        if (!row) return null;
        const record = toPostRecord(row);
        await events.record(transaction, 'post.deleted', toDeletedData(record));
        return record;
      });
      if (!deleted) return null;
      await forgetDeleted([deleted]);
      return deleted;
    },

    async deleteAllByOwner(ownerId, transaction) {
      const deleted = (await rows(`DELETE FROM posts WHERE user_id = $1 RETURNING ${POST_COLUMNS}`, [ownerId], transaction)).map(toPostRecord);
      for (const record of deleted) await events.record(transaction, 'post.deleted', toDeletedData(record));
      return deleted;
    },

    forgetDeleted,
  };
}
