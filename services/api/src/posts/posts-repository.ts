import { randomInt, randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import { QueryTypes, Sequelize, Transaction } from 'sequelize';
import { PostIdsExhaustedError } from './errors';
import type { PostCache } from './post-cache';
import { activeTraceparent, annotateActiveSpan, WEBHOOK_EVENT, WEBHOOK_IDS } from '../../../../shared/tracing';
import { createGroupCommit, GroupCommit, Settled } from '../../../../shared/db/group-commit';
import { RawStatement, rawQuery, withRawConnection } from '../../../../shared/db/raw-query';
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

/** The one posts store both layouts use. Writes are transactional, record a post event and invalidate the cache. */
export interface PostsRepository {
  /** @throws PostIdsExhaustedError when no free random pid was found */
  create(post: NewPost, pidSource: PidSource): Promise<PostRecord>;
  findById(pid: number): Promise<PostRecord | null>;
  /** Newest first; one page read through the created_at index. */
  list(limit: number, offset: number): Promise<PostPage>;
  /** Number of posts in the table. */
  count(): Promise<number>;
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
}

interface CreatedPost {
  record: PostRecord;
  deliveryIds: string[];
}

const RANDOM_PID_MIN = 10_000;
const RANDOM_PID_MAX = 99_999;
// 90 000 slots: ten misses in a row means the range is nearly full, not bad luck.
const RANDOM_PID_ATTEMPTS = 10;

const INSERT_WITH_SEQUENCE_PIDS = `INSERT INTO posts (post_uuid, user_id, post_title, post_body, post_image)
  SELECT * FROM unnest($1::uuid[], $2::int[], $3::text[], $4::text[], $5::text[]) RETURNING ${POST_COLUMNS}`;
const INSERT_WITH_RANDOM_PIDS = `INSERT INTO posts (post_uuid, user_id, post_title, post_body, post_image, pid)
  SELECT * FROM unnest($1::uuid[], $2::int[], $3::text[], $4::text[], $5::text[], $6::int[])
  ON CONFLICT (pid) DO NOTHING RETURNING ${POST_COLUMNS}`;

export function createPostsRepository({ sequelize, events, cache, removeImage, log }: PostsRepositoryDeps): PostsRepository {
  async function rows(sql: string, bind: unknown[], transaction?: Transaction): Promise<PostRow[]> {
    return sequelize.query<PostRow>(sql, { bind, type: QueryTypes.SELECT, raw: true, transaction });
  }

  /**
   * Inserts a batch of posts in one statement per attempt through `run` (inside the caller's
   * transaction); each result is the post's row, or PostIdsExhaustedError for a random pid that
   * found no free slot. Rows come back in no set order, so they are matched to the posts by their uuid.
   */
  async function insertMany(posts: readonly NewPost[], pidSource: PidSource, run: (statement: RawStatement) => Promise<PostRow[]>): Promise<(PostRow | Error)[]> {
    const uuids = posts.map(() => randomUUID());
    const results: (PostRow | Error)[] = new Array(posts.length);
    const columns = (indices: number[]) => [
      indices.map((i) => uuids[i]),
      indices.map((i) => posts[i].userId),
      indices.map((i) => posts[i].title),
      indices.map((i) => posts[i].content),
      indices.map((i) => posts[i].image),
    ];
    const place = (found: PostRow[]) => {
      const position = new Map<string, number>(uuids.map((uuid, index) => [uuid, index]));
      for (const row of found) results[position.get(row.post_uuid)!] = row;
    };
    const all = posts.map((_, index) => index);
    if (pidSource === 'sequence') {
      place(await run({ name: 'posts-insert-sequence', text: INSERT_WITH_SEQUENCE_PIDS, values: columns(all) }));
      return results;
    }
    let missing = all;
    for (let attempt = 0; attempt < RANDOM_PID_ATTEMPTS && missing.length > 0; attempt++) {
      // ON CONFLICT keeps the transaction usable after a collision (with a stored post or
      // another of the batch), so the retry of the posts that collided stays inside it.
      const pids = missing.map(() => randomInt(RANDOM_PID_MIN, RANDOM_PID_MAX + 1));
      place(await run({ name: 'posts-insert-random', text: INSERT_WITH_RANDOM_PIDS, values: [...columns(missing), pids] }));
      missing = missing.filter((index) => results[index] === undefined);
    }
    for (const index of missing) results[index] = new PostIdsExhaustedError(RANDOM_PID_ATTEMPTS);
    return results;
  }

  /** Pairs each inserted post with its event data and its request's trace; errors stay in place. */
  function createdOf(items: PendingCreate[], inserted: (PostRow | Error)[]) {
    const created = inserted.flatMap((row, index) => (row instanceof Error ? [] : [{ index, record: toPostRecord(row) }]));
    const events = created.map(({ index, record }) => ({ data: toChangedData(record), traceparent: items[index].traceparent }));
    return { created, events };
  }

  /** Each item's outcome: its record and delivery ids, or its own error (a pid not found). */
  function settle(inserted: (PostRow | Error)[], created: { index: number; record: PostRecord }[], deliveryIds: string[][]): Settled<CreatedPost>[] {
    const settled: Settled<CreatedPost>[] = inserted.map((row) => ({ ok: false, error: row }));
    created.forEach(({ index, record }, n) => (settled[index] = { ok: true, value: { record, deliveryIds: deliveryIds[n] ?? [] } }));
    return settled;
  }

  /**
   * The batch's transaction on a pooled connection, past Sequelize's pipeline: BEGIN, the
   * posts, their outbox rows (one statement), COMMIT; the jobs are added after the commit.
   */
  async function writeBatchRaw(
    items: PendingCreate[],
    pidSource: PidSource,
    recordMany: NonNullable<PostEventRecorder['recordMany']>,
  ): Promise<Settled<CreatedPost>[]> {
    const { outcomes, committed } = await withRawConnection(sequelize, async (connection) => {
      await connection.query({ text: 'BEGIN' });
      try {
        const inserted = await insertMany(
          items.map((item) => item.post),
          pidSource,
          (statement) => connection.query<PostRow>(statement),
        );
        const { created, events } = createdOf(items, inserted);
        const recorded = events.length > 0 ? await recordMany(connection, 'post.created', events) : { deliveryIds: [], committed: () => undefined };
        await connection.query({ text: 'COMMIT' });
        return { outcomes: settle(inserted, created, recorded.deliveryIds), committed: recorded.committed };
      } catch (error) {
        // A connection that broke is dropped by the pool instead; its ROLLBACK failing changes nothing.
        await connection.query({ text: 'ROLLBACK' }).catch(() => undefined);
        throw error;
      }
    });
    committed();
    return outcomes;
  }

  /** The batch in a Sequelize transaction, for a recorder without `recordMany` (one event at a time). */
  async function writeBatchSequelize(items: PendingCreate[], pidSource: PidSource): Promise<Settled<CreatedPost>[]> {
    return sequelize.transaction(async (transaction) => {
      const inserted = await insertMany(
        items.map((item) => item.post),
        pidSource,
        ({ text, values }) => rows(text, values ?? [], transaction),
      );
      const { created, events: recorded } = createdOf(items, inserted);
      for (const { data } of recorded) await events.record(transaction, 'post.created', data);
      return settle(inserted, created, []);
    });
  }

  /**
   * One group-commit batch of creates: the posts and their outbox rows in one transaction.
   * Should the batch fail, each post is tried alone, so one post's error (a user deleted
   * meanwhile) reaches only its own request.
   */
  async function createBatch(items: PendingCreate[], pidSource: PidSource): Promise<Settled<CreatedPost>[]> {
    let outcomes: Settled<CreatedPost>[];
    try {
      outcomes = events.recordMany ? await writeBatchRaw(items, pidSource, events.recordMany.bind(events)) : await writeBatchSequelize(items, pidSource);
    } catch (error) {
      if (items.length === 1) return [{ ok: false, error }];
      return Promise.all(items.map(async (item) => (await createBatch([item], pidSource))[0]));
    }
    // One invalidation for the batch (it never throws), before any of its requests is answered.
    const pids = outcomes.flatMap((outcome) => (outcome.ok ? [outcome.value.record.pid] : []));
    if (pids.length > 0) await cache.invalidate(pids);
    return outcomes;
  }

  const creates: Record<PidSource, GroupCommit<PendingCreate, CreatedPost>> = {
    sequence: createGroupCommit((items) => createBatch(items, 'sequence')),
    random: createGroupCommit((items) => createBatch(items, 'random')),
  };

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
    async create(post, pidSource) {
      // Concurrent creates share one transaction (group commit); the trace of each request travels with its own rows.
      const { record, deliveryIds } = await creates[pidSource].submit({ post, traceparent: activeTraceparent() });
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

    async count() {
      const [row] = await rawQuery<{ count: string }>(sequelize, { name: 'posts-count', text: 'SELECT count(*) AS count FROM posts' });
      return Number(row.count);
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
