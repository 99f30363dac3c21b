import type { Database, WebhookEndpoint } from '../db';
import { closeEpisode } from '../deliveries/episodes';
import { DeliveryDeps, queueRecordedDeliveries } from '../queue';
import type { Viewer } from './viewer';

/**
 * Saves the changes of an endpoint being re-enabled (`active` false to true) and closes its
 * failure episode in the same transaction (DESIGN §6 rev 4): `endpoint.recovered` when the
 * episode announced `endpoint.failing` or `endpoint.disabled`. Of two re-enables at once, one
 * closes the episode and the other finds none, so the event is written once.
 *
 * @param row - the endpoint, its changes set and not saved
 * @param deps - where to queue the event's deliveries after commit; without it the outbox relay adds them
 */
export async function saveReenabledEndpoint(db: Database, row: WebhookEndpoint, viewer: Viewer, deps?: DeliveryDeps): Promise<void> {
  const jobs = await db.sequelize.transaction(async (transaction) => {
    await row.save({ transaction });
    return closeEpisode(db.sequelize, transaction, { endpointId: row.id, reason: `re-enabled by ${viewer.operator ? 'an operator' : 'its owner'}` });
  });
  if (jobs.length > 0 && deps) await queueRecordedDeliveries(deps, jobs);
}
