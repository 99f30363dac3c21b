import { QueryTypes, type Sequelize, type Transaction } from 'sequelize';

/** What the inbox knows about one incoming webhook. */
export interface InboxEntry {
  /** The webhook-id, or the sha256 hex of the body when the sender gave none. */
  webhookId: string;
  /** The route family: `users` or `posts`. */
  topic: string;
  event: string | null;
}

/**
 * Runs `work` at most once per webhook-id (DESIGN §3 webhook_inbox). The inbox row is
 * inserted in the same transaction as the work, so a crash or an error mid-handler rolls
 * both back and a redelivery runs the work again; a row that exists is therefore a webhook
 * already processed. A concurrent duplicate waits on the primary key until the first
 * transaction ends, then sees the row.
 *
 * @returns `processed` when the work ran, `duplicate` when the id was already in the inbox
 * @throws whatever `work` throws, after rolling back
 */
export async function processOnce(
  sequelize: Sequelize,
  entry: InboxEntry,
  work: (transaction: Transaction) => Promise<void>,
): Promise<'processed' | 'duplicate'> {
  return sequelize.transaction(async (transaction) => {
    const inserted = await sequelize.query(
      `INSERT INTO webhook_inbox (webhook_id, topic, event) VALUES (:webhookId, :topic, :event)
       ON CONFLICT (webhook_id) DO NOTHING RETURNING webhook_id`,
      { replacements: { ...entry }, type: QueryTypes.SELECT, transaction },
    );
    if (inserted.length === 0) return 'duplicate';
    await work(transaction);
    await sequelize.query('UPDATE webhook_inbox SET processed_at = now() WHERE webhook_id = :webhookId', {
      replacements: { webhookId: entry.webhookId },
      transaction,
    });
    return 'processed';
  });
}
