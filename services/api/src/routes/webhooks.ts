import type { FastifyPluginAsync } from 'fastify';
import type { Database } from '../../../../shared/db';
import { getDeliveryDetails, listDeliveries, publishEvent, redeliver } from '../../../../shared/operations';
import { DeliveryNotFoundError, WebhookQueue } from '../../../../shared/queue';
import { enqueueWebhook } from '../../../../shared/deliveries/enqueue';
import { answerInCommit } from '../plugins/idempotency';
import type { ListReader } from '../plugins/list-reader';
import { visibilityFor } from '../plugins/principal';
import { joiValidatorCompiler } from '../schemas/joi-validation';
import { handleOperationsError, operatorOrUser, serviceKeyWith } from './operations-errors';
import { SECURITY, SERVICE_KEY_SECURITY, attemptObject, deliveryObject, errorResponses, idResponse, pageOf } from './operations-schemas';
import {
  EnqueueBody,
  ListDeliveriesQuery,
  PublishEventBody,
  deliveryParams,
  enqueueBody,
  listDeliveriesQuery,
  publishEventBody,
} from './webhooks-schemas';

export interface WebhookRoutesOptions {
  db: Database;
  /** Where the list of deliveries reads. */
  lists: ListReader;
  queue: WebhookQueue;
}

type IdParams = { Params: { id: string } };
const TAGS = ['webhooks'];

/**
 * The webhook routes (docs/design.md §6.2, §11.1) under /api/v1:
 * - `POST /webhooks` (service key, `webhooks:send`): one signed webhook to a URL, 202 `{"id"}`;
 * - `POST /events` (service key, `webhooks:send`): fan an event of the catalog out, 202 `{"ids"}`;
 * - `GET /webhooks`: deliveries, newest first, filtered and cursor-paginated;
 * - `GET /webhooks/:id`: one delivery with its attempts;
 * - `POST /webhooks/:id/redeliver`: 202 `{"id"}`, one new attempt with the same webhook-id.
 * Operators need the scope named; users see only deliveries to their own endpoints.
 */
export const webhookRoutes: FastifyPluginAsync<WebhookRoutesOptions> = async (app, { db, lists, queue }) => {
  app.setValidatorCompiler(joiValidatorCompiler);
  app.setErrorHandler(handleOperationsError);
  const deps = { db, queue };

  app.post<{ Body: EnqueueBody }>(
    '/webhooks',
    {
      // The Idempotency-Key handling of docs/design.md §12.1; the answer is recorded in the deliveries' commit.
      config: { idempotency: true },
      preValidation: serviceKeyWith('webhooks:send'),
      schema: {
        tags: TAGS,
        summary: 'Send one signed webhook to a URL (service keys only)',
        operationId: 'sendWebhook',
        description:
          'Queues one signed webhook to a URL (or to an endpoint) and answers with its delivery id at once; the worker sends it with retries. Service keys with `webhooks:send`; an `Idempotency-Key` header makes a retry answer as the first call did.',
        security: SERVICE_KEY_SECURITY,
        body: enqueueBody,
        response: { 202: idResponse, ...errorResponses(403, 409) },
      },
    },
    async (request, reply) => {
      const id = await enqueueWebhook(request.body, { ...deps, logger: request.log }, answerInCommit(request, 202, ([made]) => ({ id: made })));
      return reply.code(202).send({ id });
    },
  );

  app.post<{ Body: PublishEventBody }>(
    '/events',
    {
      // The Idempotency-Key handling of docs/design.md §12.1; the answer is recorded in the deliveries' commit.
      config: { idempotency: true },
      preValidation: serviceKeyWith('webhooks:send'),
      schema: {
        tags: TAGS,
        summary: "Fan an event out to the subscribed operator endpoints and, with user_id, that user's (service keys only)",
        operationId: 'publishEvent',
        description:
          "Makes one delivery for every endpoint subscribed to the event (the operator's and, with `user_id`, that user's) in one commit, and answers with their ids. Service keys with `webhooks:send`; honours `Idempotency-Key`.",
        security: SERVICE_KEY_SECURITY,
        body: publishEventBody,
        response: {
          202: {
            type: 'object',
            required: ['ids'],
            properties: { ids: { type: 'array', items: { type: 'string' }, description: 'One delivery id per delivery made.' } },
          },
          ...errorResponses(403, 409),
        },
      },
    },
    async (request, reply) => {
      const { event, payload, user_id: userId } = request.body;
      const ids = await publishEvent({ ...deps, logger: request.log }, { event, payload, userId }, answerInCommit(request, 202, (made) => ({ ids: made })));
      return reply.code(202).send({ ids });
    },
  );

  app.get<{ Querystring: ListDeliveriesQuery }>(
    '/webhooks',
    {
      preValidation: operatorOrUser('webhooks:read'),
      schema: {
        tags: TAGS,
        summary: 'List deliveries, newest first (users: deliveries to their endpoints)',
        operationId: 'listDeliveries',
        description:
          'A page of deliveries, newest first, filtered by status, event, endpoint and time; `next_cursor` continues it. Service keys with `webhooks:read` see all; users see the deliveries to their own endpoints.',
        security: SECURITY,
        querystring: listDeliveriesQuery,
        response: { 200: pageOf(deliveryObject), ...errorResponses(403) },
      },
    },
    async (request) => {
      const { status, event, endpoint_id: endpointId, since, until, limit, cursor } = request.query;
      const viewer = visibilityFor(request, 'webhooks:read');
      return lists.read(request, (reader) => listDeliveries(reader, viewer, { status, event, endpointId, since, until, limit, cursor }));
    },
  );

  app.get<IdParams>(
    '/webhooks/:id',
    {
      preValidation: operatorOrUser('webhooks:read'),
      schema: {
        tags: TAGS,
        summary: 'Read a delivery with its attempts',
        operationId: 'getDelivery',
        description:
          "One delivery with every attempt: status code, duration and the start of the answer. Service keys with `webhooks:read`; users only deliveries to their own endpoints (another's is 404).",
        security: SECURITY,
        params: deliveryParams,
        response: {
          200: {
            ...deliveryObject,
            required: [...deliveryObject.required, 'attempts'],
            properties: { ...deliveryObject.properties, attempts: { type: 'array', items: attemptObject } },
          },
          ...errorResponses(403, 404),
        },
      },
    },
    async (request) => {
      const delivery = await getDeliveryDetails(db, request.params.id, visibilityFor(request, 'webhooks:read'));
      if (!delivery) throw new DeliveryNotFoundError(request.params.id);
      return delivery;
    },
  );

  app.post<IdParams>(
    '/webhooks/:id/redeliver',
    {
      preValidation: operatorOrUser('webhooks:send'),
      schema: {
        tags: TAGS,
        summary: 'Attempt a finished delivery once more, with the same webhook-id',
        operationId: 'redeliverDelivery',
        description:
          'Queues one more attempt of a finished delivery under the same webhook-id, so a receiver that dedupes by it processes it once. Service keys with `webhooks:send`; users for their own endpoints.',
        security: SECURITY,
        params: deliveryParams,
        response: { 202: idResponse, ...errorResponses(403, 404, 409, 503) },
      },
    },
    async (request, reply) => {
      await redeliver({ ...deps, logger: request.log }, request.params.id, visibilityFor(request, 'webhooks:send'));
      return reply.code(202).send({ id: request.params.id });
    },
  );
};
