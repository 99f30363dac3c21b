import type { Sequelize, Transaction } from 'sequelize';
import { insertEventDeliveryJobs } from './fan-out';
import type { JobToAdd } from '../queue/webhook-queue';
import type { OperationalEvent } from './operational-event-names';

export { OPERATIONAL_EVENTS, isReservedEventName, type OperationalEvent } from './operational-event-names';

/** The endpoint an operational event is about. */
export interface AboutEndpoint {
  /** Null for an ad-hoc delivery's `delivery.exhausted`, which goes to operator endpoints only. */
  id: number | null;
  /** Its owner, whose own endpoints also receive the event; null for an operator endpoint. */
  userId: number | null;
}

/**
 * Writes an operational event inside `transaction` (the one that made the change it
 * announces) through the ordinary fan-out: an event row of kind `operational` and one
 * delivery per endpoint that receives it (subscription.ts): those that
 * list the event by name in `events` (an empty list does not take it), among the operator
 * endpoints and, for a user's endpoint, that user's own, whose filter matches `data`; never
 * the endpoint it is about (docs/design.md §6.6).
 *
 * @param data - the event's data (docs/design.md §6.6), a non-empty object
 * @returns the jobs to add once `transaction` committed
 */
export async function insertOperationalEvent(
  sequelize: Sequelize,
  transaction: Transaction,
  event: OperationalEvent,
  about: AboutEndpoint,
  data: Record<string, unknown>,
): Promise<JobToAdd[]> {
  return insertEventDeliveryJobs(sequelize, transaction, {
    kind: 'operational',
    event,
    data,
    ownerUserId: about.userId,
    aboutEndpointId: about.id ?? undefined,
  });
}
