import { QueryTypes, type Sequelize, type Transaction } from 'sequelize';

/** A delivery row as the outbox relay (shared/queue/outbox.ts) turns it into a job. */
export interface RelayRow {
  id: string;
  endpoint_id: number | null;
  url: string;
  next_attempt_at: Date | null;
  attempts: number;
  one_shot: boolean;
}

const ROW_FIELDS = 'id, endpoint_id, url, next_attempt_at, attempts, one_shot';
const QUEUED = `status IN ('pending', 'delivering') AND enqueued_at IS NOT NULL`;

/**
 * Locks pending rows that never reached the queue (`enqueued_at` NULL), older than 1 s so a
 * commit's own enqueue wins the race, oldest first, at most `limit`, skipping rows another
 * relay holds; mark them with shared/deliveries `markEnqueued` in the same `transaction`.
 */
export async function lockUnqueued(sequelize: Sequelize, transaction: Transaction, limit: number): Promise<RelayRow[]> {
  return sequelize.query<RelayRow>(
    `SELECT ${ROW_FIELDS} FROM webhook_deliveries
      WHERE status = 'pending' AND enqueued_at IS NULL AND created_at < now() - interval '1 second'
      ORDER BY created_at LIMIT $1 FOR UPDATE SKIP LOCKED`,
    { bind: [limit], type: QueryTypes.SELECT, transaction },
  );
}

/**
 * One batch of the queued rows (pending or delivering, `enqueued_at` set) whose ids follow
 * `after`, in primary-key order, at most `limit`, without locks: a sweep walks them all.
 */
export async function queuedAfter(sequelize: Sequelize, after: string, limit: number): Promise<RelayRow[]> {
  return sequelize.query<RelayRow>(`SELECT ${ROW_FIELDS} FROM webhook_deliveries WHERE ${QUEUED} AND id > $1 ORDER BY id LIMIT $2`, {
    bind: [after, limit],
    type: QueryTypes.SELECT,
  });
}

/**
 * Locks queued rows untouched for `untouchedMs` (and not due later than that ago), least
 * recently touched first, at most `limit`, skipping rows another relay holds: those whose
 * job Redis may have lost. Touch them with `markEnqueued` in the same `transaction`.
 */
export async function lockStaleQueued(sequelize: Sequelize, transaction: Transaction, untouchedMs: number, limit: number): Promise<RelayRow[]> {
  return sequelize.query<RelayRow>(
    `SELECT ${ROW_FIELDS} FROM webhook_deliveries
      WHERE ${QUEUED} AND updated_at < now() - $1 * interval '1 millisecond'
        AND (next_attempt_at IS NULL OR next_attempt_at < now() - $1 * interval '1 millisecond')
      ORDER BY updated_at LIMIT $2 FOR UPDATE SKIP LOCKED`,
    { bind: [untouchedMs, limit], type: QueryTypes.SELECT, transaction },
  );
}
