import type { FastifyPluginAsync } from 'fastify';
import type { Database } from '../../../../shared/db';
import type { ListReader } from '../plugins/list-reader';
import type { CircuitState } from '../../../../shared/endpoint-gate';
import type { EndpointRules } from '../../../../shared/operations';
import type { WebhookQueue } from '../../../../shared/queue';
import { endpointRoutes } from './endpoints';
import { eventTypeRoutes } from './event-types';
import { statsRoutes } from './stats';
import { webhookRoutes } from './webhooks';

export interface OperationsRoutesOptions {
  db: Database;
  /** Where lists, searches and stats read: the replica or the primary. */
  lists: ListReader;
  queue: WebhookQueue;
  /** The circuit state of an endpoint's breaker, for its stats. */
  readCircuit: (endpointId: number) => Promise<CircuitState>;
  /** WEBHOOK_RETENTION_DAYS, the reach of a replay. */
  retentionDays: number;
  /** What the deployment adds to the endpoint rules (https for auth in production). */
  endpointRules: EndpointRules;
}

/** Every route of the operations API (docs/design.md §11.1), mounted under /api/v1 in both layouts. */
export const operationsRoutes: FastifyPluginAsync<OperationsRoutesOptions> = async (app, options) => {
  await app.register(webhookRoutes, { db: options.db, lists: options.lists, queue: options.queue });
  await app.register(endpointRoutes, options);
  await app.register(eventTypeRoutes, { db: options.db, lists: options.lists });
  await app.register(statsRoutes, { lists: options.lists });
};
