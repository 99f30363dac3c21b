import { QueryTypes, type Sequelize, type Transaction } from 'sequelize';
import { findByIds, keyRange, keysOf } from '../db/partitions';
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

// Only rows still unmarked: a claimed row was marked by its claim and is neither locked nor
// written again, so a flush that finds every row claimed writes nothing (no WAL to flush).
const MARK_UNCLAIMED = {
  name: 'outbox-mark-unclaimed',
  text: `UPDATE webhook_deliveries w SET enqueued_at = now(), updated_at = now()
    FROM (SELECT id, created_at FROM webhook_deliveries
           WHERE id = ANY($1::text[]) AND ${keyRange('created_at', '$2', '$3')} AND enqueued_at IS NULL FOR UPDATE SKIP LOCKED) unheld
   WHERE w.id = unheld.id AND w.created_at = unheld.created_at AND ${keyRange('w.created_at', '$2', '$3')}
   RETURNING w.id`,
};

/** Rows per statement of a flush. */
const MARK_CHUNK = 1_000;

/** The enqueued marks of one process, written a while after their jobs were added. */
export interface DeferredEnqueuedMarks {
  /** Marks these rows (their jobs are in the queue) at the next flush, at most `delayMs` from now. */
  add(ids: readonly string[]): void;
  /**
   * Writes the marks waiting now (those of rows no claim has marked meanwhile) and waits for
   * the flushes under way.
   * @throws the database's error; the rows stay unmarked, so the relay adds their jobs again (a no-op)
   */
  flush(): Promise<void>;
}

/**
 * The enqueued mark after commit, off the hot path (docs/design.md §6.1): the claim marks the
 * rows a worker takes, and most jobs are claimed within milliseconds of their add, so marking
 * each commit's rows at once cost an UPDATE per batch of creates for rows that the claim
 * marks anyway. Waiting `delayMs` (under the relay's 1 s grace for unmarked rows) leaves one
 * statement per flush, which writes only the rows still waiting in the queue (a backlog).
 * Should the process die before a flush, its rows stay unmarked and pending: the relay adds
 * their jobs again, a no-op for a job still in Redis, and marks them.
 *
 * @param delayMs - how long a mark waits, ms
 * @param onError - told of every flush that failed, with its rows (left to the relay)
 */
export function createDeferredEnqueuedMarks(sequelize: Sequelize, delayMs: number, onError: (error: unknown, ids: string[]) => void): DeferredEnqueuedMarks {
  let waiting: string[] = [];
  let timer: NodeJS.Timeout | undefined;
  const writing = new Set<Promise<void>>();

  function start(): Promise<void> {
    clearTimeout(timer);
    timer = undefined;
    const ids = waiting;
    waiting = [];
    const write = (async () => {
      for (let from = 0; from < ids.length; from += MARK_CHUNK) {
        const some = ids.slice(from, from + MARK_CHUNK);
        // Rows a commit just wrote lie in their ids' own partitions, and a row this leaves out
        // was claimed, not missing: no second look in the legacy partition.
        await rawQuery<{ id: string }>(sequelize, { ...MARK_UNCLAIMED, values: [some, ...keysOf(some)] });
      }
    })();
    writing.add(write);
    void write.catch((error: unknown) => onError(error, ids)).finally(() => writing.delete(write));
    return write;
  }

  return {
    add(ids) {
      if (ids.length === 0) return;
      waiting.push(...ids);
      timer ??= setTimeout(start, delayMs).unref();
    },
    async flush() {
      const own = start();
      // Earlier flushes still running were already reported to onError when they failed.
      await Promise.allSettled([...writing]);
      await own;
    },
  };
}
