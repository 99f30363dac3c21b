import { QueryTypes, type Sequelize, type Transaction } from 'sequelize';

/** What the inbox knows about one incoming webhook. */
export interface InboxEntry {
  /** The webhook-id, or the sha256 hex of the body when the sender gave none. */
  webhookId: string;
  /** The route family: `users` or `posts`. */
  topic: string;
  event: string | null;
  /** Lowercase hex sha256 of the raw body, recorded for every accepted webhook. */
  bodySha256: string;
}

/** How {@link processOnce} recognises a webhook it has already processed. */
export interface InboxOptions {
  /**
   * Also treat a body already recorded under any webhook-id as a duplicate. On whenever
   * X-Signature-only deliveries are accepted (RECEIVER_ACCEPT_X_SIGNATURE_ONLY): such a
   * delivery has no timestamp, so stripping the `webhook-*` headers off a captured delivery
   * would otherwise make it new again (docs/design.md §8).
   */
  dedupeByBody: boolean;
}

/** What happens after the inbox transaction commits, such as cache invalidation; see {@link processOnce}. */
export type AfterCommit = () => Promise<void>;

/**
 * Runs `work` at most once per webhook-id (docs/design.md §3 webhook_inbox), and with
 * `dedupeByBody` at most once per body. The inbox row is inserted in the same transaction as
 * the work, so a crash or an error mid-handler rolls both back and a redelivery runs the work
 * again; a row that exists is therefore a webhook already processed. A concurrent duplicate
 * waits on the primary key (or, for a body, on a transaction-scoped advisory lock on its
 * hash) until the first transaction ends, then sees the row.
 *
 * `work` may return an {@link AfterCommit} step: it runs once the transaction has committed,
 * never after a rollback, and its failure does not undo the webhook (it is thrown to the caller
 * after the commit; the work is done and a redelivery is a duplicate).
 *
 * @returns `processed` when the work ran, `duplicate` when the id (or body) was already in the inbox
 * @throws whatever `work` throws, after rolling back; whatever the after-commit step throws
 */
export async function processOnce(
  sequelize: Sequelize,
  entry: InboxEntry,
  options: InboxOptions,
  work: (transaction: Transaction) => Promise<AfterCommit | void>,
): Promise<'processed' | 'duplicate'> {
  let afterCommit: AfterCommit | undefined;
  const outcome = await sequelize.transaction(async (transaction) => {
    if (options.dedupeByBody) {
      // Serialises deliveries of one body, so two concurrent copies cannot both miss each other.
      await sequelize.query("SELECT pg_advisory_xact_lock(hashtextextended('webhook_inbox:' || :bodySha256, 0))", {
        replacements: { bodySha256: entry.bodySha256 },
        type: QueryTypes.SELECT,
        transaction,
      });
      const seen = await sequelize.query('SELECT 1 FROM webhook_inbox WHERE body_sha256 = :bodySha256 LIMIT 1', {
        replacements: { bodySha256: entry.bodySha256 },
        type: QueryTypes.SELECT,
        transaction,
      });
      if (seen.length > 0) return 'duplicate' as const;
    }
    const inserted = await sequelize.query(
      `INSERT INTO webhook_inbox (webhook_id, topic, event, body_sha256) VALUES (:webhookId, :topic, :event, :bodySha256)
       ON CONFLICT (webhook_id) DO NOTHING RETURNING webhook_id`,
      { replacements: { ...entry }, type: QueryTypes.SELECT, transaction },
    );
    if (inserted.length === 0) return 'duplicate' as const;
    afterCommit = (await work(transaction)) ?? undefined;
    await sequelize.query('UPDATE webhook_inbox SET processed_at = now() WHERE webhook_id = :webhookId', {
      replacements: { webhookId: entry.webhookId },
      transaction,
    });
    return 'processed' as const;
  });
  if (afterCommit) await afterCommit();
  return outcome;
}
