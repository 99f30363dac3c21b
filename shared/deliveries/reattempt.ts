import { QueryTypes, type Sequelize } from 'sequelize';
import type { DeliveryStatus } from '../db';
import { findById, keyOfId, keyRange, keysAt } from '../db/partitions';

/** A delivery row as a redelivery reads it first, whatever its status. */
export interface RedeliveryCandidate {
  id: string;
  status: DeliveryStatus;
  endpoint_id: number | null;
  url: string;
  /** Its partition key: a legacy row's names the legacy partition whatever its id reads as. */
  created_at: Date;
}

/**
 * A finished delivery made `pending` again for exactly one more attempt (`one_shot`), as
 * {@link rollBackReattempts} needs it should its job not reach the queue.
 */
export interface Reattempt {
  id: string;
  endpoint_id: number | null;
  url: string;
  created_at: Date;
  /** The status it had, which a rollback puts back. */
  previous: Extract<DeliveryStatus, 'succeeded' | 'failed'>;
}

// A reattempt is queued at once (`enqueued_at`), due now, and runs one attempt whatever the retry policy.
const REOPEN = `status = 'pending', one_shot = true, enqueued_at = now(), next_attempt_at = now(), updated_at = now()`;

/** The delivery `id`, or undefined when there is none (docs/design.md §3.4: its day's partition, then the legacy one). */
export async function findRedeliveryCandidate(sequelize: Sequelize, id: string): Promise<RedeliveryCandidate | undefined> {
  const [row] = await findById(id, (key) =>
    sequelize.query<Omit<RedeliveryCandidate, 'id'>>(`SELECT status, endpoint_id, url, created_at FROM webhook_deliveries WHERE id = $1 AND ${keyOfId('created_at', '$2')}`, {
      bind: [id, key],
      type: QueryTypes.SELECT,
    }),
  );
  return row && { id, ...row };
}

/**
 * Makes a finished delivery pending for one redelivery, only while it still has the status it
 * was read with (a concurrent redelivery or attempt changed nothing since).
 *
 * @returns the reattempt, or null when the delivery changed meanwhile
 */
export async function reopenForRedelivery(sequelize: Sequelize, delivery: RedeliveryCandidate): Promise<Reattempt | null> {
  const { status } = delivery;
  if (status !== 'succeeded' && status !== 'failed') return null;
  const reopened = await sequelize.query<{ id: string }>(
    `UPDATE webhook_deliveries SET ${REOPEN} WHERE id = $1 AND ${keyOfId('created_at', '$2')} AND status = $3 RETURNING id`,
    { bind: [delivery.id, delivery.created_at, status], type: QueryTypes.SELECT },
  );
  return reopened.length === 0 ? null : { id: delivery.id, endpoint_id: delivery.endpoint_id, url: delivery.url, created_at: delivery.created_at, previous: status };
}

/**
 * Makes the endpoint's failed deliveries whose last attempt (or, never attempted, whose
 * failure) is at or after `since` pending for one more attempt each, oldest first, at most
 * `limit`; rows another transaction holds are skipped (docs/design.md §11.1 recover).
 */
export async function reopenFailedForRecovery(sequelize: Sequelize, endpointId: number, since: Date, limit: number): Promise<Reattempt[]> {
  const rows = await sequelize.query<Omit<Reattempt, 'previous'>>(
    `UPDATE webhook_deliveries
        SET ${REOPEN}
      WHERE status = 'failed' AND id IN (
        SELECT d.id FROM webhook_deliveries d
         WHERE d.endpoint_id = $1 AND d.status = 'failed'
           AND coalesce((SELECT max(a.attempted_at) FROM webhook_attempts a WHERE a.delivery_id = d.id), d.updated_at) >= $2
         ORDER BY d.created_at, d.id LIMIT $3 FOR UPDATE SKIP LOCKED)
      RETURNING id, endpoint_id, url, created_at`,
    { bind: [endpointId, since, limit], type: QueryTypes.SELECT },
  );
  return rows.map((row) => ({ ...row, previous: 'failed' }));
}

/**
 * Puts reattempts whose jobs did not reach the queue back as they were: each row still
 * pending gets its previous status again and loses `one_shot`. A row the worker took
 * meanwhile (no longer pending) is left to it.
 */
export async function rollBackReattempts(sequelize: Sequelize, reattempts: readonly Reattempt[]): Promise<void> {
  if (reattempts.length === 0) return;
  // The rows' own keys: a legacy row's names the legacy partition whatever its id reads as.
  await sequelize.query(
    `UPDATE webhook_deliveries d SET status = r.previous, one_shot = false, updated_at = now()
       FROM unnest($1::text[], $2::text[]) AS r(id, previous)
      WHERE d.id = r.id AND ${keyRange('d.created_at', '$3', '$4')} AND d.status = 'pending'`,
    { bind: [reattempts.map((row) => row.id), reattempts.map((row) => row.previous), ...keysAt(reattempts.map((row) => row.created_at))] },
  );
}
