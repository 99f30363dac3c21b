import { JobToAdd, isQueueReady, QueueUnavailableError } from '../queue';
import { DeliveryDeps, queueRecordedDeliveries } from '../deliveries/enqueue';
import { endpointGateKey } from '../endpoint-gate';
import { insertReplayDeliveries } from '../deliveries/replay';
import { findVisibleEndpoint } from './endpoints';
import { EndpointDisabledError, EndpointNotFoundError, ReplayWindowError } from './errors';
import type { Viewer } from './viewer';

/** At most this many events are replayed per call (docs/design.md §14.1). */
export const REPLAY_LIMIT = 10_000;

const DAY_MS = 86_400_000;

/**
 * `POST /endpoints/{id}/replay` (docs/design.md §14.1): every post change or fan-out event made at or
 * after `since` that the endpoint would receive now (its events, filter and owner) and has no
 * delivery row of any status for gets one, oldest first, at most {@link REPLAY_LIMIT}. The rows
 * commit first and are queued after (the outbox relay queues them if Redis goes away between).
 *
 * @param since - must lie within the last WEBHOOK_RETENTION_DAYS minus one day
 * @param retentionDays - WEBHOOK_RETENTION_DAYS
 * @returns how many deliveries were made
 * @throws EndpointNotFoundError, EndpointDisabledError (409), ReplayWindowError (400),
 *   QueueUnavailableError when Redis is away (nothing is written then)
 */
export async function replayEndpoint(deps: DeliveryDeps, endpointId: number, viewer: Viewer, since: Date, retentionDays: number): Promise<number> {
  if (since.getTime() < Date.now() - (retentionDays - 1) * DAY_MS) throw new ReplayWindowError(retentionDays);
  const endpoint = await findVisibleEndpoint(deps.db, endpointId, viewer);
  if (!endpoint) throw new EndpointNotFoundError(endpointId);
  if (!endpoint.active) throw new EndpointDisabledError(endpointId);
  if (!isQueueReady(deps.queue)) throw new QueueUnavailableError('Redis is not connected.');
  const ids = await insertReplayDeliveries(deps.db.sequelize, endpointId, since, REPLAY_LIMIT);
  const gate = endpointGateKey(endpointId);
  const jobs: JobToAdd[] = ids.map((deliveryId) => ({ deliveryId, gate }));
  if (jobs.length > 0) await queueRecordedDeliveries(deps, jobs);
  return jobs.length;
}
