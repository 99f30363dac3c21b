import type { FastifyPluginAsync } from 'fastify';
import type { Database } from '../../../../shared/db';
import {
  EndpointNotFoundError,
  type EndpointRules,
  USERINFO_REFUSED,
  createEndpoint,
  deleteEndpoint,
  getEndpoint,
  getEndpointStats,
  listEndpoints,
  recoverEndpoint,
  replayEndpoint,
  rotateEndpointSecret,
  sendTestEvent,
  updateEndpoint,
} from '../../../../shared/operations';
import type { WebhookQueue } from '../../../../shared/queue';
import type { CircuitState } from '../../../../shared/endpoint-gate';
import type { ListReader } from '../plugins/list-reader';
import { visibilityFor } from '../plugins/principal';
import { joiValidatorCompiler } from '../schemas/joi-validation';
import {
  CreateEndpointBody,
  UpdateEndpointBody,
  createEndpointBody,
  recoverBody,
  replayBody,
  rotateSecretBody,
  updateEndpointBody,
} from './endpoints-schemas';
import { endpointIdOf, handleOperationsError, operatorOrUser } from './operations-errors';
import {
  PageQuery,
  SECURITY,
  endpointObject,
  endpointParams,
  errorResponses,
  idResponse,
  pageOf,
  pageQuery,
} from './operations-schemas';
import { StatsQuery, endpointStatsObject, statsQuery } from './stats-schemas';

export interface EndpointRoutesOptions {
  db: Database;
  /** Where the list and the stats read. */
  lists: ListReader;
  queue: WebhookQueue;
  /** The circuit state of an endpoint's breaker, for its stats. */
  readCircuit: (endpointId: number) => Promise<CircuitState>;
  /** WEBHOOK_RETENTION_DAYS: how far back a replay may reach. */
  retentionDays: number;
  /** The deployment's endpoint rules (shared/operations `endpointRulesOf`: https for auth in production). */
  endpointRules: EndpointRules;
}

type IdParams = { Params: { id: string } };
const TAGS = ['endpoints'];

/**
 * The error answers of a create (`create: true`) or a change: the common ones, with what the
 * endpoint's own rules add (docs/design.md §11.3): a url with userinfo is a 400, and a create by a
 * user who owns MAX_ENDPOINTS_PER_USER endpoints a 403.
 */
function endpointWriteErrors(create: boolean, ...statuses: number[]): Record<number, object> {
  const responses = errorResponses(403, ...statuses) as Record<number, { description: string }>;
  responses[400] = { ...responses[400], description: `${responses[400].description}; a url with userinfo: \`${USERINFO_REFUSED}\`` };
  if (create) responses[403] = { ...responses[403], description: `${responses[403].description}; a user at MAX_ENDPOINTS_PER_USER: \`Endpoint limit reached (N).\`` };
  return responses;
}

/**
 * The endpoint routes of docs/design.md §11.1 under /api/v1, for operators (service keys with the
 * route's scope) and users (their own endpoints; another's answers 404): create, list, read,
 * change, delete, rotate-secret, test, recover, replay and stats (with its series for charts).
 */
export const endpointRoutes: FastifyPluginAsync<EndpointRoutesOptions> = async (app, { db, lists, queue, readCircuit, retentionDays, endpointRules }) => {
  app.setValidatorCompiler(joiValidatorCompiler);
  app.setErrorHandler(handleOperationsError);
  const deps = { db, queue };

  app.post<{ Body: CreateEndpointBody }>(
    '/endpoints',
    {
      preValidation: operatorOrUser('endpoints:write'),
      schema: {
        tags: TAGS,
        summary: 'Add an endpoint (operator endpoint with a service key, your own with a user token)',
        operationId: 'createEndpoint',
        description:
          'Adds an endpoint: its URL, the events it subscribes to and its controls (headers, ordering, rate limit, filter, signature scheme, auth). The answer carries the signing secret, shown only here and on rotation. Service keys with `endpoints:write` make operator endpoints; users make their own.',
        security: SECURITY,
        body: createEndpointBody,
        response: {
          201: {
            ...endpointObject,
            required: [...endpointObject.required, 'secret'],
            properties: {
              ...endpointObject.properties,
              secret: { type: 'string', description: 'Shown only here and on rotation; for ed25519 the `whpk_` public key (the private key is never shown).' },
            },
          },
          ...endpointWriteErrors(true),
        },
      },
    },
    async (request, reply) => {
      const viewer = visibilityFor(request, 'endpoints:write');
      const { rate_limit_per_s: rateLimitPerS, signature_scheme: signatureScheme, client_certificate: clientCertificate, ...fields } = request.body;
      const { endpoint, secret } = await createEndpoint(
        db,
        { ...fields, rateLimitPerS, signatureScheme, clientCertificate, userId: viewer.operator ? null : viewer.userId },
        endpointRules,
      );
      return reply.code(201).send({ ...endpoint, secret });
    },
  );

  app.get<{ Querystring: PageQuery }>(
    '/endpoints',
    {
      preValidation: operatorOrUser('endpoints:read'),
      schema: {
        tags: TAGS,
        summary: 'List endpoints, newest first (users: their own)',
        operationId: 'listEndpoints',
        description:
          'A page of endpoints, newest first. Service keys with `endpoints:read` see all; users see their own.',
        security: SECURITY,
        querystring: pageQuery,
        response: { 200: pageOf(endpointObject), ...errorResponses(403) },
      },
    },
    async (request) => {
      const viewer = visibilityFor(request, 'endpoints:read');
      return lists.read(request, (reader) => listEndpoints(reader, viewer, request.query));
    },
  );

  app.get<IdParams>(
    '/endpoints/:id',
    {
      preValidation: operatorOrUser('endpoints:read'),
      schema: {
        tags: TAGS,
        summary: 'Read an endpoint',
        operationId: 'getEndpoint',
        description:
          "One endpoint with its state (`active`, `disabled_reason`). Users read only their own (another's is 404).",
        security: SECURITY,
        params: endpointParams,
        response: { 200: endpointObject, ...errorResponses(403, 404) },
      },
    },
    async (request) => {
      const id = endpointIdOf(request.params.id);
      const endpoint = await getEndpoint(db, id, visibilityFor(request, 'endpoints:read'));
      if (!endpoint) throw new EndpointNotFoundError(id);
      return endpoint;
    },
  );

  app.patch<IdParams & { Body: UpdateEndpointBody }>(
    '/endpoints/:id',
    {
      preValidation: operatorOrUser('endpoints:write'),
      schema: {
        tags: TAGS,
        summary: 'Change an endpoint; `active: true` re-enables it',
        operationId: 'updateEndpoint',
        description:
          'Changes the fields sent and keeps the others; `active: true` re-enables a disabled endpoint and clears `disabled_reason`. Service keys with `endpoints:write`; users their own.',
        security: SECURITY,
        params: endpointParams,
        body: updateEndpointBody,
        response: { 200: endpointObject, ...endpointWriteErrors(false, 404) },
      },
    },
    async (request) =>
      updateEndpoint(
        db,
        endpointIdOf(request.params.id),
        visibilityFor(request, 'endpoints:write'),
        { ...request.body, rateLimitPerS: request.body.rate_limit_per_s, clientCertificate: request.body.client_certificate },
        { ...deps, logger: request.log },
        endpointRules,
      ),
  );

  app.delete<IdParams>(
    '/endpoints/:id',
    {
      preValidation: operatorOrUser('endpoints:write'),
      schema: {
        tags: TAGS,
        summary: 'Delete an endpoint; its pending deliveries end failed',
        operationId: 'deleteEndpoint',
        description:
          'Deletes an endpoint; its pending deliveries end `failed`. Service keys with `endpoints:write`; users their own.',
        security: SECURITY,
        params: endpointParams,
        response: { 204: { type: 'null', description: 'Deleted' }, ...errorResponses(403, 404) },
      },
    },
    async (request, reply) => {
      await deleteEndpoint(db, endpointIdOf(request.params.id), visibilityFor(request, 'endpoints:write'));
      return reply.code(204).send();
    },
  );

  app.post<IdParams & { Body: { overlap_hours: number } }>(
    '/endpoints/:id/rotate-secret',
    {
      preValidation: operatorOrUser('endpoints:write'),
      schema: {
        tags: TAGS,
        summary: 'Rotate the signing secret; the old one also signs during the overlap',
        operationId: 'rotateEndpointSecret',
        description:
          'Makes a new signing secret and answers with it; the old one signs beside it until the overlap ends, so receivers can switch without losing a webhook.',
        security: SECURITY,
        params: endpointParams,
        body: rotateSecretBody,
        response: {
          200: {
            type: 'object',
            required: ['secret'],
            properties: { secret: { type: 'string', description: 'The new secret; for ed25519 the new `whpk_` public key.' } },
          },
          ...errorResponses(403, 404),
        },
      },
    },
    async (request) => {
      const { secret } = await rotateEndpointSecret(db, endpointIdOf(request.params.id), visibilityFor(request, 'endpoints:write'), {
        overlapHours: request.body.overlap_hours,
      });
      return { secret };
    },
  );

  app.post<IdParams>(
    '/endpoints/:id/test',
    {
      preValidation: operatorOrUser('endpoints:write'),
      schema: {
        tags: TAGS,
        summary: 'Send a signed webhook.test delivery',
        operationId: 'testEndpoint',
        description:
          'Queues a signed `webhook.test` delivery to the endpoint and answers with its id, to check a receiver end to end.',
        security: SECURITY,
        params: endpointParams,
        response: { 202: idResponse, ...errorResponses(403, 404, 409) },
      },
    },
    async (request, reply) => {
      const id = await sendTestEvent(deps, endpointIdOf(request.params.id), visibilityFor(request, 'endpoints:write'));
      return reply.code(202).send({ id });
    },
  );

  app.post<IdParams & { Body: { since: Date } }>(
    '/endpoints/:id/recover',
    {
      preValidation: operatorOrUser('webhooks:send'),
      schema: {
        tags: TAGS,
        summary: 'Attempt again every failed delivery since a time (at most 10,000 per call)',
        operationId: 'recoverEndpoint',
        description:
          'Queues another attempt of each failed delivery to this endpoint since a time, at most 10,000 per call; the answer says how many and whether more remain. Service keys with `webhooks:send`; users their own.',
        security: SECURITY,
        params: endpointParams,
        body: recoverBody,
        response: {
          202: { type: 'object', required: ['count'], properties: { count: { type: 'integer' } } },
          ...errorResponses(403, 404, 409, 503),
        },
      },
    },
    async (request, reply) => {
      const count = await recoverEndpoint(deps, endpointIdOf(request.params.id), visibilityFor(request, 'webhooks:send'), request.body.since);
      return reply.code(202).send({ count });
    },
  );

  app.post<IdParams & { Body: { since: Date } }>(
    '/endpoints/:id/replay',
    {
      preValidation: operatorOrUser('webhooks:send'),
      schema: {
        tags: TAGS,
        summary: 'Deliver the past events this endpoint would receive now and never got (at most 10,000 per call)',
        operationId: 'replayEndpoint',
        description:
          'Makes deliveries of the stored past events this endpoint subscribes to now and never received, at most 10,000 per call. Service keys with `webhooks:send`; users their own.',
        security: SECURITY,
        params: endpointParams,
        body: replayBody,
        response: {
          202: { type: 'object', required: ['count'], properties: { count: { type: 'integer', description: 'Deliveries made.' } } },
          ...errorResponses(400, 403, 404, 409, 503),
        },
      },
    },
    async (request, reply) => {
      const viewer = visibilityFor(request, 'webhooks:send');
      const count = await replayEndpoint(deps, endpointIdOf(request.params.id), viewer, request.body.since, retentionDays);
      return reply.code(202).send({ count });
    },
  );

  app.get<IdParams & { Querystring: StatsQuery }>(
    '/endpoints/:id/stats',
    {
      preValidation: operatorOrUser('endpoints:read'),
      schema: {
        tags: TAGS,
        summary: "An endpoint's health over the last 24 hours; with `?series=1h|24h` its attempts per interval for charts",
        operationId: 'getEndpointStats',
        description:
          'Success rate, attempt counts and latency percentiles of the endpoint over the last 24 hours, and with `series` its counts per interval for charts.',
        security: SECURITY,
        params: endpointParams,
        querystring: statsQuery,
        response: { 200: endpointStatsObject, ...errorResponses(403, 404) },
      },
    },
    async (request) => {
      const [id, viewer] = [endpointIdOf(request.params.id), visibilityFor(request, 'endpoints:read')];
      return lists.read(request, (reader) => getEndpointStats(reader, id, viewer, readCircuit, request.query.series));
    },
  );
};
