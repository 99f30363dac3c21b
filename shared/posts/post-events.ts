import type { Sequelize, Transaction } from 'sequelize';
import type { JobToAdd } from '../queue/webhook-queue';
import { insertEventDeliveryJobs } from '../deliveries/fan-out';
import type { Outbox } from '../deliveries/outbox';

/** The post events of docs/design.md §6.1. */
export type PostEventName = 'post.created' | 'post.updated' | 'post.deleted';

/** Data of `post.created` and `post.updated` (docs/design.md §6.1); times are ISO 8601, `image` the stored file name or null. */
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

/** Data of `post.deleted` (docs/design.md §6.1). */
export interface PostDeletedData {
  pid: number;
  uuid: string;
  user_id: number;
}

export type PostEventData = PostChangedData | PostDeletedData;

/**
 * The outbox side of post updates and deletes (docs/design.md §6.1): each event exists exactly
 * when its change commits, so it is recorded inside the change's transaction.
 */
export interface PostEventRecorder {
  /** Runs inside `transaction`; a rejection rolls the post change back. */
  record(transaction: Transaction, event: PostEventName, data: PostEventData): Promise<void>;
}

/**
 * The outbox side of every post change, creates included: a create writes its `post.created`
 * outbox rows in the posts' own statement (create-batch.ts), and the jobs are added once that
 * statement committed.
 */
export interface PostOutbox extends PostEventRecorder {
  /** Adds the jobs of outbox rows a committed statement wrote, without holding up the caller. */
  queueCommitted(jobs: readonly JobToAdd[]): void;
}

/**
 * The outbox's write without the enqueue: the event's row and one `webhook_deliveries` row per
 * endpoint that receives it (shared/deliveries/subscription.ts, the owner being `data.user_id`),
 * inside `transaction`, with `enqueued_at` NULL.
 *
 * @param data - the event data of docs/design.md §6.1 (`pid`, `uuid`, `user_id`, ...)
 * @returns each delivery as the job to add, with its endpoint's gate key; none when no endpoint subscribes
 * @throws EncryptionError (shared/webhook) when `data` is empty or not serialisable
 */
export async function insertPostEventJobs(sequelize: Sequelize, transaction: Transaction, event: PostEventName, data: object): Promise<JobToAdd[]> {
  return insertEventDeliveryJobs(sequelize, transaction, { kind: 'post', event, data, ownerUserId: ownerOf(data) });
}

/**
 * The api's post events over its outbox: each event's row and one delivery per endpoint that
 * receives it ({@link insertPostEventJobs}) are written inside the change's transaction, so they commit or roll back with
 * it; after commit the outbox adds the jobs without holding up the caller.
 *
 * @throws EncryptionError (shared/webhook), from `record`, when `data` is empty or not serialisable
 */
export function postOutboxOf(sequelize: Sequelize, outbox: Pick<Outbox, 'queueAfterCommit' | 'queueCommitted'>): PostOutbox {
  return {
    record: async (transaction, event, data) => outbox.queueAfterCommit(transaction, await insertPostEventJobs(sequelize, transaction, event, data)),
    queueCommitted: (jobs) => outbox.queueCommitted(jobs),
  };
}

/**
 * The recorder of a process without a queue (the receiver): the rows wait for the api's outbox
 * relay, which queues them within OUTBOX_RELAY_INTERVAL_MS (docs/design.md §6.1).
 */
export function relayedPostEvents(sequelize: Sequelize): PostEventRecorder {
  return { record: async (transaction, event, data) => void (await insertPostEventJobs(sequelize, transaction, event, data)) };
}

/** The post's owner (`data.user_id`), whose own endpoints also receive the event. */
function ownerOf(data: object): number | null {
  const owner = (data as { user_id?: unknown }).user_id;
  return typeof owner === 'number' ? owner : null;
}
