import type { Transaction } from 'sequelize';
import type { RawConnection } from '../../../../shared/db/raw-query';
import type { RecordedBatch } from '../../../../shared/queue/outbox';

/** The post events of DESIGN §6. */
export type PostEventName = 'post.created' | 'post.updated' | 'post.deleted';

/** Data of `post.created` and `post.updated` (DESIGN §6); times are ISO 8601, `image` the stored file name or null. */
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

/** Data of `post.deleted` (DESIGN §6). */
export interface PostDeletedData {
  pid: number;
  uuid: string;
  user_id: number;
}

export type PostEventData = PostChangedData | PostDeletedData;

/**
 * Records a post event inside the transaction that changes the post, so the event exists
 * exactly when the change commits (the outbox of DESIGN §6).
 */
export interface PostEventRecorder {
  /** Runs inside `transaction`; a rejection rolls the post change back. */
  record(transaction: Transaction, event: PostEventName, data: PostEventData): Promise<void>;
  /**
   * Optional: many events of one kind in one statement (group commit) on `connection`, inside
   * the caller's BEGIN .. COMMIT, each with the trace of the request that wrote it; the caller
   * calls `committed()` after its COMMIT. Without it, the events are recorded one by one in a
   * Sequelize transaction.
   * @returns each event's delivery ids, in input order, and `committed`
   */
  recordMany?(connection: RawConnection, event: PostEventName, events: readonly { data: PostEventData; traceparent: string | null }[]): Promise<RecordedBatch>;
}
