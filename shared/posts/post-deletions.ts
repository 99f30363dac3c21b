import type { FastifyBaseLogger } from 'fastify';
import { QueryTypes, type Sequelize, type Transaction } from 'sequelize';
import type { PostCache } from './post-cache';
import type { PostEventRecorder } from './post-events';
import { POST_COLUMNS, PostRecord, PostRow, toDeletedData, toPostRecord } from './post-record';

/** Deleting a user's posts, for whoever deletes users (the receiver) and for the posts repository. */
export interface PostDeletions {
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

export interface PostDeletionsDeps {
  sequelize: Sequelize;
  events: PostEventRecorder;
  cache: PostCache;
  /** Removes a deleted post's image file; failures are logged, never surfaced. */
  removeImage(name: string): Promise<void>;
  log: FastifyBaseLogger;
}

export function createPostDeletions({ sequelize, events, cache, removeImage, log }: PostDeletionsDeps): PostDeletions {
  return {
    async deleteAllByOwner(ownerId, transaction) {
      const rows = await sequelize.query<PostRow>(`DELETE FROM posts WHERE user_id = $1 RETURNING ${POST_COLUMNS}`, {
        bind: [ownerId],
        type: QueryTypes.SELECT,
        raw: true,
        transaction,
      });
      const deleted = rows.map(toPostRecord);
      for (const record of deleted) await events.record(transaction, 'post.deleted', toDeletedData(record));
      return deleted;
    },

    async forgetDeleted(posts) {
      for (const post of posts) {
        await cache.invalidate(post.pid);
        if (post.image) {
          const image = post.image;
          await removeImage(image).catch((err) => log.warn({ err, pid: post.pid, image }, 'removing a deleted post image failed'));
        }
      }
    },
  };
}
