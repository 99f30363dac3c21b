import { randomInt, randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import { QueryTypes, Sequelize, Transaction } from 'sequelize';
import { PostIdsExhaustedError } from './errors';
import type { PostCache } from './post-cache';
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

const RANDOM_PID_MIN = 10_000;
const RANDOM_PID_MAX = 99_999;
// 90 000 slots: ten misses in a row means the range is nearly full, not bad luck.
const RANDOM_PID_ATTEMPTS = 10;

export function createPostsRepository({ sequelize, events, cache, removeImage, log }: PostsRepositoryDeps): PostsRepository {
  async function rows(sql: string, bind: unknown[], transaction?: Transaction): Promise<PostRow[]> {
    return sequelize.query<PostRow>(sql, { bind, type: QueryTypes.SELECT, raw: true, transaction });
  }

  async function insert(post: NewPost, pidSource: PidSource, transaction: Transaction): Promise<PostRow> {
    const values = [randomUUID(), post.userId, post.title, post.content, post.image];
    if (pidSource === 'sequence') {
      const [row] = await rows(
        `INSERT INTO posts (post_uuid, user_id, post_title, post_body, post_image) VALUES ($1, $2, $3, $4, $5) RETURNING ${POST_COLUMNS}`,
        values,
        transaction,
      );
      return row;
    }
    for (let attempt = 0; attempt < RANDOM_PID_ATTEMPTS; attempt++) {
      // ON CONFLICT keeps the transaction usable after a collision, so the retry stays inside it.
      const [row] = await rows(
        `INSERT INTO posts (post_uuid, user_id, post_title, post_body, post_image, pid) VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (pid) DO NOTHING RETURNING ${POST_COLUMNS}`,
        [...values, randomInt(RANDOM_PID_MIN, RANDOM_PID_MAX + 1)],
        transaction,
      );
      if (row) return row;
    }
    throw new PostIdsExhaustedError(RANDOM_PID_ATTEMPTS);
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
    async create(post, pidSource) {
      const created = await sequelize.transaction(async (transaction) => {
        const record = toPostRecord(await insert(post, pidSource, transaction));
        await events.record(transaction, 'post.created', toChangedData(record));
        return record;
      });
      await cache.invalidate(created.pid);
      return created;
    },

    async findById(pid) {
      if (!isStorablePid(pid)) return null;
      const [row] = await rows(`SELECT ${POST_COLUMNS} FROM posts WHERE pid = $1`, [pid]);
      return row ? toPostRecord(row) : null;
    },

    async list(limit, offset) {
      // No window count here: `count(*) OVER ()` makes PostgreSQL read and sort the whole table per page.
      const found = await sequelize.query<PostRow>(
        `SELECT ${POST_COLUMNS} FROM posts ORDER BY created_at DESC, pid DESC LIMIT $1 OFFSET $2`,
        { bind: [limit, offset], type: QueryTypes.SELECT, raw: true },
      );
      return { posts: found.map(toPostRecord) };
    },

    async count() {
      const [row] = await sequelize.query<{ count: string }>('SELECT count(*) AS count FROM posts', { type: QueryTypes.SELECT, raw: true });
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
