import { QueryTypes, Sequelize, Transaction } from 'sequelize';
import { keyOf, keyOfId } from '../db/partitions';
import type { JobToAdd } from '../queue/webhook-queue';
import { insertOperationalEvent } from './operational-events';

/**
 * The delivery as `delivery.exhausted` tells it. Its event is looked for in the delivery's own
 * day: a replay's older event is never operational (replay skips that kind), so not finding it
 * there says as much. `notice` is the kind `endpoint.disabled` had before it became operational.
 */
const EXHAUSTED = `
  SELECT d.id, d.endpoint_id, d.event, d.attempts, d.last_status_code, d.last_error,
         COALESCE(ev.kind IN ('operational', 'notice'), false) AS operational, e.user_id, e.episode_id, now() AS occurred_at
    FROM webhook_deliveries d
    LEFT JOIN webhook_events ev ON ev.id = d.event_id AND ${keyOfId('ev.created_at', '$2')}
    LEFT JOIN webhook_endpoints e ON e.id = d.endpoint_id
   WHERE d.id = $1 AND ${keyOfId('d.created_at', '$2')} AND d.status = 'failed'`;

interface ExhaustedRow {
  id: string;
  endpoint_id: number | null;
  event: string | null;
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  operational: boolean;
  user_id: number | null;
  episode_id: string | null;
  occurred_at: Date;
}

/**
 * `delivery.exhausted` (docs/design.md §6.6) for a delivery that just ended `failed` with every
 * attempt used, written inside `transaction`, the one that recorded that last attempt, so it
 * is written once with it. Data `{delivery_id, endpoint_id, event, attempt_count,
 * last_status_code, last_error, occurred_at, episode_id}` (`episode_id` its endpoint's open
 * episode, null for an ad-hoc delivery). It goes to the endpoints subscribed to it by name:
 * operator endpoints and, for a user's endpoint, that user's own, never the endpoint itself;
 * an ad-hoc delivery's to operator endpoints only. A delivery of an operational event emits
 * nothing (no loops).
 *
 * @returns the jobs of the event's deliveries, to add after commit
 */
export async function announceExhausted(sequelize: Sequelize, transaction: Transaction, deliveryId: string): Promise<JobToAdd[]> {
  const [row] = await sequelize.query<ExhaustedRow>(EXHAUSTED, { bind: [deliveryId, keyOf(deliveryId)], type: QueryTypes.SELECT, transaction });
  if (!row || row.operational) return [];
  return insertOperationalEvent(
    sequelize,
    transaction,
    'delivery.exhausted',
    { id: row.endpoint_id, userId: row.endpoint_id === null ? null : row.user_id },
    {
      delivery_id: row.id,
      endpoint_id: row.endpoint_id,
      event: row.event,
      attempt_count: row.attempts,
      last_status_code: row.last_status_code,
      last_error: row.last_error,
      occurred_at: row.occurred_at.toISOString(),
      episode_id: row.episode_id,
    },
  );
}
