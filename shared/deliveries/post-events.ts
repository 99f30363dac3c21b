import type { Sequelize, Transaction } from 'sequelize';
import type { DeliveryJob } from '../queue/webhook-queue';
import { insertEventDeliveryJobs } from './fan-out';

/** The post events of docs/design.md §6. */
export type PostEvent = 'post.created' | 'post.updated' | 'post.deleted';

/**
 * The outbox's write without the enqueue: one `webhook_deliveries` row per active endpoint
 * subscribed to `event`, among the operator endpoints and those of the post's owner
 * (`data.user_id`; docs/design.md §6 ownership), inside `transaction`, with `enqueued_at` NULL. A
 * process without a queue (the receiver) records events this way and the api's relay queues
 * them within OUTBOX_RELAY_INTERVAL_MS; the outbox's `record` (shared/queue/outbox.ts) adds the
 * immediate enqueue after commit.
 *
 * @param data - the event data of docs/design.md §6 (`pid`, `uuid`, `user_id`, ...)
 * @returns the new delivery ids (webhook-ids), none when no endpoint subscribes
 * @throws EncryptionError (shared/webhook) when `data` is empty or not serialisable
 */
export async function insertDeliveries(
  sequelize: Sequelize,
  transaction: Transaction,
  event: PostEvent,
  data: object,
): Promise<string[]> {
  return (await insertDeliveryJobs(sequelize, transaction, event, data)).map((job) => job.deliveryId);
}

/** {@link insertDeliveries}, returning each row as the job to add, with its endpoint's gate key. */
export async function insertDeliveryJobs(sequelize: Sequelize, transaction: Transaction, event: PostEvent, data: object): Promise<DeliveryJob[]> {
  return insertEventDeliveryJobs(sequelize, transaction, { kind: 'post', event, data, ownerUserId: ownerOf(data) });
}

/** The post's owner (`data.user_id`), whose own endpoints also receive the event. */
function ownerOf(data: object): number | null {
  const owner = (data as { user_id?: unknown }).user_id;
  return typeof owner === 'number' ? owner : null;
}
