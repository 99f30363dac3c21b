import type { Transaction } from 'sequelize';
import type { DeliveryJob } from '../../../../shared/queue/webhook-queue';

/** The post events of docs/design.md §6. */
export type PostEventName = 'post.created' | 'post.updated' | 'post.deleted';

/** Data of `post.created` and `post.updated` (docs/design.md §6); times are ISO 8601, `image` the stored file name or null. */
export interface PostChangedData {
  pid: number;
  uuid: string;
  user_id: number;
  title: string;
  content: string;
  image: string | null;
  created_at: string;
  updated_at: string;
}

/** Data of `post.deleted` (docs/design.md §6). */
export interface PostDeletedData {
  pid: number;
  uuid: string;
  user_id: number;
}

export type PostEventData = PostChangedData | PostDeletedData;

/**
 * The outbox side of post changes (docs/design.md §6): each event exists exactly when its change
 * commits. An update or a delete records its event inside its transaction; a create writes
 * its event in the posts' own statement, and its jobs are added once that committed.
 */
export interface PostEventRecorder {
  /** Runs inside `transaction`; a rejection rolls the post change back. */
  record(transaction: Transaction, event: PostEventName, data: PostEventData): Promise<void>;
  /**
   * The outbox's side of creates, which write their `post.created` outbox rows in the posts'
   * own statement (shared/deliveries/fan-out.ts `fanOutClauses`, the group commit): adds the
   * jobs once that statement committed. Updates and deletes use `record`.
   */
  queueCommitted(jobs: readonly DeliveryJob[]): void;
}
