import type { FastifyError, FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { Database } from '../../../../shared/db';
import {
  DeliveryInProgressError,
  DeliveryNotFoundError,
  InvalidWebhookError,
  QueueUnavailableError,
  WebhookQueue,
  enqueueWebhook,
  getDelivery,
  redeliverWebhook,
} from '../../../../shared/queue';
import { EncryptionError, LogicError } from '../../../../shared/webhook/errors';
import { ApiError } from '../errors';
import { joiValidatorCompiler } from '../schemas/joi-validation';
import { EnqueueBody, deliveryParams, enqueueBody, idResponse } from './webhooks-schemas';

export interface WebhookRoutesOptions {
  db: Database;
  queue: WebhookQueue;
}

/**
 * The webhook routes for other services (DESIGN §6), registered under /api/v1 behind the
 * layout's auth hook:
 * - `POST /webhooks` `{url, event, payload, method?, headers?, secret?}`: 202 `{"id"}`;
 * - `GET /webhooks/:id`: 200 the status and every attempt, only for the user who enqueued it;
 * - `POST /webhooks/:id/redeliver`: 202 `{"id"}`, one new attempt with the same webhook-id.
 * Errors answer in the layout's shape: 400 invalid, 404 unknown, 409 still in progress,
 * 503 queue unavailable; anything else goes to the app's error handler.
 */
export const webhookRoutes: FastifyPluginAsync<WebhookRoutesOptions> = async (app, { db, queue }) => {
  app.setValidatorCompiler(joiValidatorCompiler);
  app.setErrorHandler(handleError);

  app.post<{ Body: EnqueueBody }>(
    '/webhooks',
    { schema: { body: enqueueBody, response: { 202: idResponse } } },
    async (request, reply) => {
      const id = await enqueueWebhook({ ...request.body, userId: userIdOf(request) }, { db, queue, logger: request.log });
      return reply.code(202).send({ id });
    },
  );

  app.get<{ Params: { id: string } }>('/webhooks/:id', { schema: { params: deliveryParams } }, async (request) => {
    const delivery = await getDelivery(db, request.params.id, userIdOf(request));
    if (!delivery) throw new DeliveryNotFoundError(request.params.id);
    return delivery;
  });

  app.post<{ Params: { id: string } }>(
    '/webhooks/:id/redeliver',
    { schema: { params: deliveryParams, response: { 202: idResponse } } },
    async (request, reply) => {
      await redeliverWebhook({ db, queue, logger: request.log }, request.params.id, userIdOf(request));
      return reply.code(202).send({ id: request.params.id });
    },
  );
};

function userIdOf(request: FastifyRequest): number {
  const userId = request.user?.userId;
  // The layout's auth hook runs first; reaching here without a user is a wiring mistake.
  if (typeof userId !== 'number') throw new Error('webhook routes reached without an authenticated user');
  return userId;
}

/**
 * Maps the delivery errors to client-safe ApiErrors; rethrown, they reach the layout's own
 * error handler, which answers in the layout's shape (A `{status,message}`, B `{message}`).
 */
async function handleError(error: FastifyError): Promise<never> {
  if (error.validation || error.code === 'FST_ERR_VALIDATION') throw new ApiError(400, error.message, { cause: error });
  if (error instanceof InvalidWebhookError || error instanceof EncryptionError || error instanceof LogicError) {
    throw new ApiError(400, error.message, { cause: error });
  }
  if (error instanceof DeliveryNotFoundError) throw new ApiError(404, 'Webhook delivery not found.', { cause: error });
  if (error instanceof DeliveryInProgressError) throw new ApiError(409, error.message, { cause: error });
  if (error instanceof QueueUnavailableError) {
    throw new ApiError(503, 'The webhook queue is unavailable; try again later.', { cause: error });
  }
  throw error;
}
