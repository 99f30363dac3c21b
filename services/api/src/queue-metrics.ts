import { QueryTypes } from 'sequelize';
import type { Database } from '../../../shared/db';
import type { Metrics } from '../../../shared/metrics';
import { QueueUnavailableError, type WebhookQueue, isQueueReady } from '../../../shared/queue';

const QUEUE_STATES = ['waiting', 'active', 'delayed', 'failed'] as const;

/**
 * Reads the outbox backlog and the queue's job counts, per partition, into their gauges
 * (every partition that may hold jobs, so a change of the count leaves none unseen); meant to run
 * right before each `/metrics` scrape, so the figures are current and cost nothing between scrapes.
 *
 * @throws QueueUnavailableError while the queue's connection is not ready; the outbox gauge is set by then
 */
export async function collectQueueMetrics(metrics: Metrics, queue: WebhookQueue, database: Database): Promise<void> {
  const [pending] = await database.sequelize.query<{ count: string }>(
    `SELECT count(*) AS count FROM webhook_deliveries WHERE status = 'pending' AND enqueued_at IS NULL`,
    { type: QueryTypes.SELECT },
  );
  metrics.outboxPending.set(Number(pending.count));
  // Second, so the outbox figure is still current while Redis is away and this rejects.
  // BullMQ would wait for a connection that is not ready yet, holding the scrape.
  if (!isQueueReady(queue)) throw new QueueUnavailableError('Redis is not connected.');
  const { byShard } = await queue.getJobCounts([...QUEUE_STATES]);
  // A partition no longer drained (its record reset) must not keep its last figures.
  metrics.queueJobs.reset();
  for (const [shard, counts] of byShard) {
    for (const state of QUEUE_STATES) metrics.queueJobs.set({ state, partition: String(shard) }, counts[state] ?? 0);
  }
}
