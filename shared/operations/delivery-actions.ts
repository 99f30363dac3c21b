import { QueryTypes } from 'sequelize';
import { DeliveryNotFoundError, QueueUnavailableError, isQueueReady } from '../queue';
import { DeliveryDeps, InCommit, queueReattempts, queueRecordedDeliveries, redeliverWebhook } from '../deliveries/enqueue';
import { findById, keyOfId } from '../db/partitions';
import { eventDataOf, eventEnvelope } from '../deliveries/event-data';
import { insertEventDeliveryJobs } from '../deliveries/fan-out';
import { isReservedEventName } from '../deliveries/operational-event-names';
import { reopenFailedForRecovery } from '../deliveries/reattempt';
import { gateKeyOf } from '../endpoint-gate';
import { insertSingleDelivery } from '../deliveries/events';
import { activeTraceparent } from '../tracing';
import { newWebhookId } from '../webhook/signing';
import { visibleDeliveries } from './delivery-log';
import { findVisibleEndpoint } from './endpoints';
import { EndpointDisabledError, EndpointNotFoundError, ReservedEventNameError } from './errors';
import { assertKnownEventTypes } from './event-catalog';
import type { Viewer } from './viewer';

/** At most this many deliveries are recovered per call (docs/design.md §11.1). */
export const RECOVER_LIMIT = 10_000;

/** The text of a `webhook.test` delivery's data. */
export const TEST_MESSAGE = 'This is a test webhook.';

/**
 * `POST /webhooks/{id}/redeliver`: exactly one new attempt with the same webhook-id, for a
 * delivery the viewer may see. It works whether or not Redis still holds the old job.
 *
 * @throws DeliveryNotFoundError when the viewer may not see it; EndpointDisabledError when its
 *   endpoint is disabled or deleted (a redelivery never bypasses that); DeliveryInProgressError,
 *   QueueUnavailableError as `redeliverWebhook`
 */
export async function redeliver(deps: DeliveryDeps, id: string, viewer: Viewer): Promise<void> {
  const [row] = await findById(id, (key) => {
    const bind: unknown[] = [id, key];
    return deps.db.sequelize.query<{ endpoint_id: number | null; active: boolean | null }>(
      `SELECT d.endpoint_id, e.active FROM webhook_deliveries d LEFT JOIN webhook_endpoints e ON e.id = d.endpoint_id
        WHERE d.id = $1 AND ${keyOfId('d.created_at', '$2')} AND ${visibleDeliveries(viewer, bind)}`,
      { bind, type: QueryTypes.SELECT },
    );
  });
  if (!row) throw new DeliveryNotFoundError(id);
  if (row.endpoint_id !== null && row.active !== true) throw new EndpointDisabledError(row.endpoint_id);
  await redeliverWebhook(deps, id);
}

/**
 * `POST /endpoints/{id}/recover`: every failed delivery to the endpoint whose last attempt
 * (or, never attempted, whose failure) is at or after `since` gets one new attempt with its
 * own webhook-id, oldest first, at most {@link RECOVER_LIMIT} per call.
 *
 * @returns how many deliveries were queued again
 * @throws EndpointNotFoundError, EndpointDisabledError, QueueUnavailableError (nothing changed)
 */
export async function recoverEndpoint(deps: DeliveryDeps, endpointId: number, viewer: Viewer, since: Date): Promise<number> {
  const endpoint = await findVisibleEndpoint(deps.db, endpointId, viewer);
  if (!endpoint) throw new EndpointNotFoundError(endpointId);
  if (!endpoint.active) throw new EndpointDisabledError(endpointId);
  if (!isQueueReady(deps.queue)) throw new QueueUnavailableError('Redis is not connected.');
  const reattempts = await reopenFailedForRecovery(deps.db.sequelize, endpointId, since, RECOVER_LIMIT);
  await queueReattempts(deps, reattempts);
  return reattempts.length;
}

/**
 * `POST /endpoints/{id}/test`: one signed `webhook.test` delivery to the endpoint, whatever it
 * subscribes to, data `{"endpoint_id","message","sent_at"}`.
 *
 * @returns the delivery id (webhook-id)
 * @throws EndpointNotFoundError, EndpointDisabledError
 */
export async function sendTestEvent(deps: DeliveryDeps, endpointId: number, viewer: Viewer): Promise<string> {
  const endpoint = await findVisibleEndpoint(deps.db, endpointId, viewer);
  if (!endpoint) throw new EndpointNotFoundError(endpointId);
  if (!endpoint.active) throw new EndpointDisabledError(endpointId);
  const id = newWebhookId();
  const data = { endpoint_id: endpoint.id, message: TEST_MESSAGE, sent_at: new Date().toISOString() };
  await insertSingleDelivery(deps.db.sequelize, {
    id,
    kind: 'test',
    event: 'webhook.test',
    body: eventEnvelope('webhook.test', data),
    endpointId: endpoint.id,
    userId: endpoint.userId,
    url: endpoint.url,
    method: 'POST',
    headers: {},
    secret: null,
    algo: 'sha256',
    signatureHeader: 'X-Signature',
    traceparent: activeTraceparent(),
  });
  await queueRecordedDeliveries(deps, [{ deliveryId: id, gate: gateKeyOf({ endpointId: endpoint.id, url: endpoint.url }) }]);
  return id;
}

/**
 * `POST /events`: fans an event of the catalog out to the subscribed operator endpoints
 * and, with `userId`, that user's endpoints; rows first, then the jobs (the outbox relay
 * adds them if Redis is away). A `payload` string holding JSON is the value it encodes, any
 * other string stays a string (docs/design.md §14.3, shared/deliveries `eventDataOf`).
 *
 * @param inCommit - run in the rows' own transaction, with the delivery ids
 * @returns one delivery id per delivery made (none when nobody subscribes)
 * @throws ReservedEventNameError for an operational event's name (docs/design.md §6.6);
 *   UnknownEventTypeError for an event outside the catalog; EncryptionError
 *   (shared/webhook) for an empty payload (`null`, `{}` and `[]`, also as strings)
 */
export async function publishEvent(
  deps: DeliveryDeps,
  input: { event: string; payload: unknown; userId?: number | null },
  inCommit?: InCommit,
): Promise<string[]> {
  if (isReservedEventName(input.event)) throw new ReservedEventNameError(input.event);
  await assertKnownEventTypes(deps.db, [input.event]);
  const jobs = await deps.db.sequelize.transaction(async (transaction) => {
    const made = await insertEventDeliveryJobs(deps.db.sequelize, transaction, {
      kind: 'fan-out',
      event: input.event,
      data: eventDataOf(input.payload),
      ownerUserId: input.userId ?? null,
    });
    await inCommit?.(transaction, made.map((job) => job.deliveryId));
    return made;
  });
  if (jobs.length > 0) await queueRecordedDeliveries(deps, jobs);
  return jobs.map((job) => job.deliveryId);
}
