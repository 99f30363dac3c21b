import type { Sequelize, Transaction } from 'sequelize';

/**
 * The deliveries' side of deleting an endpoint, inside the deletion's `transaction`: every
 * delivery of it is marked `endpoint_deleted`, which tells the worker, as for a hard delete,
 * never to sign with another secret; its pending and delivering ones end `failed` with
 * `last_error` `endpoint deleted`. The others keep their status and stay readable.
 */
export async function endDeliveriesOfDeletedEndpoint(sequelize: Sequelize, transaction: Transaction, endpointId: number): Promise<void> {
  await sequelize.query(
    `UPDATE webhook_deliveries
        SET endpoint_deleted = true,
            status = CASE WHEN status IN ('pending', 'delivering') THEN 'failed' ELSE status END,
            last_error = CASE WHEN status IN ('pending', 'delivering') THEN 'endpoint deleted' ELSE last_error END,
            next_attempt_at = CASE WHEN status IN ('pending', 'delivering') THEN NULL ELSE next_attempt_at END,
            updated_at = now()
      WHERE endpoint_id = $1`,
    { bind: [endpointId], transaction },
  );
}
