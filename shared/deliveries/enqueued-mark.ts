import { QueryTypes, type Sequelize, type Transaction } from 'sequelize';
import { findByIds, keyRange } from '../db/partitions';
import { rawQuery } from '../db/raw-query';

/**
 * Sets `enqueued_at` on delivery rows whose jobs are in the queue, skipping rows another
 * transaction holds. The job is already in Redis, so a worker may be claiming some of these
 * rows in a batch of its own: waiting for them, while holding the rest, let the two statements
 * lock the same rows in opposite orders, a deadlock PostgreSQL resolves only after its
 * `deadlock_timeout` (1 s), by failing one of them. A skipped row loses nothing: the claim sets
 * `enqueued_at` itself, and a row left pending and unmarked is added again by the relay.
 */
export async function markEnqueued(sequelize: Sequelize, ids: string[], transaction?: Transaction): Promise<void> {
  const sql = `UPDATE webhook_deliveries w SET enqueued_at = now(), updated_at = now()
    FROM (SELECT id, created_at FROM webhook_deliveries WHERE id = ANY($1::text[]) AND ${keyRange('created_at', '$2', '$3')} FOR UPDATE SKIP LOCKED) unheld
   WHERE w.id = unheld.id AND w.created_at = unheld.created_at AND ${keyRange('w.created_at', '$2', '$3')}
   RETURNING w.id`;
  await findByIds(ids, (some, keys) =>
    // Outside a transaction this runs after every batch of creates: a prepared statement, past Sequelize's pipeline.
    transaction
      ? sequelize.query<{ id: string }>(sql, { bind: [some, ...keys], transaction, type: QueryTypes.SELECT })
      : rawQuery<{ id: string }>(sequelize, { name: 'outbox-mark-enqueued', text: sql, values: [some, ...keys] }),
  );
}
