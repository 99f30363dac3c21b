import type { FastifyPluginAsync } from 'fastify';
import type { Database } from '../../../../shared/db';
import { addEventType, listEventTypes } from '../../../../shared/operations';
import type { ListReader } from '../plugins/list-reader';
import { currentPrincipal } from '../plugins/principal';
import { joiValidatorCompiler } from '../schemas/joi-validation';
import { handleOperationsError, serviceKeyWith } from './operations-errors';
import { SECURITY, SERVICE_KEY_SECURITY, errorResponses } from './operations-schemas';
import { CreateEventTypeBody, createEventTypeBody, eventTypeObject } from './webhooks-schemas';

const TAGS = ['event types'];

/**
 * The event catalog of docs/design.md §11.1 under /api/v1: `GET /event-types` for any principal,
 * `POST /event-types` for a service key with `endpoints:write` (409 for a name taken). The
 * list reads where `lists` says (the replica, docs/design.md §13.3).
 */
export const eventTypeRoutes: FastifyPluginAsync<{ db: Database; lists: ListReader }> = async (app, { db, lists }) => {
  app.setValidatorCompiler(joiValidatorCompiler);
  app.setErrorHandler(handleOperationsError);

  app.get(
    '/event-types',
    {
      schema: {
        tags: TAGS,
        summary: 'The event types endpoints may subscribe to and services may send',
        operationId: 'listEventTypes',
        description:
          "The catalog: each event type's name, description and JSON Schema, built-in and added ones.",
        security: SECURITY,
        response: {
          200: { type: 'object', required: ['data'], properties: { data: { type: 'array', items: eventTypeObject } } },
          ...errorResponses(),
        },
      },
    },
    async (request) => {
      currentPrincipal(request);
      return { data: await lists.read(request, (reader) => listEventTypes(reader)) };
    },
  );

  app.post<{ Body: CreateEventTypeBody }>(
    '/event-types',
    {
      preValidation: serviceKeyWith('endpoints:write'),
      schema: {
        tags: TAGS,
        summary: 'Add an event type to the catalog (service keys only)',
        operationId: 'createEventType',
        description:
          'Adds an event type with its description and JSON Schema; endpoints may then subscribe to it and services send it. Service keys with `endpoints:write`.',
        security: SERVICE_KEY_SECURITY,
        body: createEventTypeBody,
        response: { 201: eventTypeObject, ...errorResponses(403, 409) },
      },
    },
    async (request, reply) => {
      const { name, description, schema } = request.body;
      const type = await addEventType(db, { name, description: description ?? null, schema: schema ?? null });
      return reply.code(201).send(type);
    },
  );
};
