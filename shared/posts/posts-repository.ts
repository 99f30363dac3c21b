import { Readable } from 'node:stream';
import { QueryTypes, Transaction } from 'sequelize';
import { activeTraceparent, annotateActiveSpan, WEBHOOK_EVENT, WEBHOOK_IDS } from '../tracing';
import { createGroupCommit, GroupCommit, Settled } from '../db/group-commit';
import { isoTimeSql } from '../db/iso-time-sql';
import { rawQuery } from '../db/raw-query';
import { createBatchWriter, CreatedPost, NewPost, PidSource, PostCreate } from './create-batch';
import type { IdempotencyOwner, PostIdempotencyClaims } from './idempotency';
import type { PostOutbox } from './post-events';
import { createPostDeletions, PostDeletions, PostDeletionsDeps } from './post-deletions';
import { isStorablePid, POST_COLUMNS, PostRecord, PostRow, toChangedData, toDeletedData, toPostRecord } from './post-record';

export interface PostChanges {
  title?: string;
  content?: string;
}

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
export interface PostsRepository extends PostDeletions {
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
}

export interface PostsRepositoryDeps extends PostDeletionsDeps {
  events: PostOutbox;
  /** How a create records its pid under the request's Idempotency-Key (the api's idempotency store). */
  claims: PostIdempotencyClaims;
}

/** Layout B's post object (docs/design.md §5) of the posts row `p`, a FROM item. */
const layoutBPostSql = `CROSS JOIN LATERAL (
     SELECT p.pid::text AS pid, p.post_title AS title, p.post_body AS content,
            ${isoTimeSql('p.created_at')} AS created_at, ${isoTimeSql('p.updated_at')} AS updated_at
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

export function createPostsRepository(deps: PostsRepositoryDeps): PostsRepository {
  const { sequelize, events, cache, claims } = deps;
  const deletions = createPostDeletions(deps);
  async function rows(sql: string, bind: unknown[], transaction?: Transaction): Promise<PostRow[]> {
    return sequelize.query<PostRow>(sql, { bind, type: QueryTypes.SELECT, raw: true, transaction });
  }

  const writeBatch = createBatchWriter({ sequelize, claims });
  /** One group-commit batch of creates; its outbox jobs are added and its posts invalidated before any of its requests is answered. */
  async function createBatch(items: PostCreate[], pidSource: PidSource): Promise<Settled<CreatedPost>[]> {
    const outcomes = await writeBatch(items, pidSource);
    const created = outcomes.flatMap((outcome) => (outcome.ok ? [outcome.value] : []));
    events.queueCommitted(created.flatMap((post) => post.jobs));
    // One invalidation for the batch (it never throws).
    if (created.length > 0) await cache.invalidate(created.map((post) => post.record.pid));
    return outcomes;
  }
  const creates: Record<PidSource, GroupCommit<PostCreate, CreatedPost>> = {
    sequence: createGroupCommit((items) => createBatch(items, 'sequence')),
    random: createGroupCommit((items) => createBatch(items, 'random')),
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

  return {
    async create(post, pidSource, claim = null) {
      // Concurrent creates share one transaction (group commit); the trace of each request travels with its own rows.
      const { record, jobs } = await creates[pidSource].submit({ post, traceparent: activeTraceparent(), claim });
      annotateActiveSpan({ [WEBHOOK_EVENT]: 'post.created', [WEBHOOK_IDS]: jobs.map((job) => job.deliveryId) });
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
      await deletions.forgetDeleted([deleted]);
      return deleted;
    },

    deleteAllByOwner: deletions.deleteAllByOwner,
    forgetDeleted: deletions.forgetDeleted,
  };
}
