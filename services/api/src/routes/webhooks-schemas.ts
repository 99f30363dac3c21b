import Joi from 'joi';
import { OPERATIONAL_EVENTS } from '../../../../shared/deliveries/operational-event-names';
import { EVENT_TYPE_NAME } from '../../../../shared/operations';
import { WEBHOOK_METHODS } from '../../../../shared/deliveries/enqueue';
import { validatedBy } from '../schemas/joi-validation';
import { PAGE_QUERY_JOI, PAGE_QUERY_PROPERTIES } from './operations-schemas';

/** What the event name fields say of the names only the system sends (docs/design.md §6.6). */
const RESERVED = `the operational events' names (${OPERATIONAL_EVENTS.join(', ')}) are reserved for the system: 400`;

const payloadJoi = Joi.alternatives(Joi.object().min(1), Joi.array().min(1), Joi.string().min(1));
const payloadSchema = { description: 'A non-empty object, array, or raw JSON string; sent as `_data` of the envelope.' };

/**
 * `POST /webhooks` body (docs/design.md §6.2): `{url, event, payload, secret, method?, headers?}`.
 * `secret` is required over HTTP, so the api never signs a caller's payload with the
 * application's derived secret; `event` is the caller's choice, not limited to the catalog.
 */
const enqueueJoi = Joi.object({
  url: Joi.string().uri({ scheme: ['http', 'https'] }).max(2048).required(),
  event: Joi.string().min(1).max(200).required(),
  payload: payloadJoi.required(),
  method: Joi.string()
    .uppercase()
    .valid(...WEBHOOK_METHODS),
  // Header names are RFC 9110 tokens; a bounded number of short values keeps rows small.
  headers: Joi.object()
    .pattern(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, Joi.string().max(4096))
    .max(50),
  secret: Joi.string().min(1).max(1024).required(),
})
  .required()
  .unknown(false);

/** The same body as JSON Schema, for the OpenAPI document; Joi above validates it. */
export const enqueueBody = validatedBy(
  {
    type: 'object',
    required: ['url', 'event', 'payload', 'secret'],
    additionalProperties: false,
    properties: {
      url: { type: 'string', format: 'uri', maxLength: 2048 },
      event: { type: 'string', minLength: 1, maxLength: 200, description: `Your choice; ${RESERVED}.` },
      payload: payloadSchema,
      method: { type: 'string', enum: [...WEBHOOK_METHODS] },
      headers: { type: 'object', additionalProperties: { type: 'string', maxLength: 4096 }, maxProperties: 50 },
      secret: { type: 'string', minLength: 1, maxLength: 1024, description: '`whsec_` + base64 (Standard Webhooks), or any other string.' },
    },
  },
  enqueueJoi,
);

/** `:id` of the delivery routes. */
export const deliveryParams = validatedBy(
  { type: 'object', required: ['id'], properties: { id: { type: 'string', minLength: 1, maxLength: 200 } } },
  Joi.object({ id: Joi.string().min(1).max(200).required() }),
);

export interface EnqueueBody {
  url: string;
  event: string;
  payload: object | string;
  method?: (typeof WEBHOOK_METHODS)[number];
  headers?: Record<string, string>;
  secret: string;
}

const STATUSES = ['pending', 'delivering', 'succeeded', 'failed'] as const;

/** `GET /webhooks` query (docs/design.md §11.1): filters, then the page. `since`/`until` bound `created_at`. */
export const listDeliveriesQuery = validatedBy(
  {
    type: 'object',
    properties: {
      status: { type: 'string', enum: [...STATUSES] },
      event: { type: 'string' },
      endpoint_id: { type: 'integer', minimum: 1 },
      since: { type: 'string', format: 'date-time', description: 'ISO 8601; `created_at` at or after it.' },
      until: { type: 'string', format: 'date-time', description: 'ISO 8601; `created_at` at or before it.' },
      ...PAGE_QUERY_PROPERTIES,
    },
  },
  Joi.object({
    status: Joi.string().valid(...STATUSES),
    event: Joi.string().min(1).max(200),
    endpoint_id: Joi.number().integer().min(1).max(2 ** 31 - 1),
    since: Joi.date().iso(),
    until: Joi.date().iso(),
    ...PAGE_QUERY_JOI,
  }).unknown(true),
);

export interface ListDeliveriesQuery {
  status?: (typeof STATUSES)[number];
  event?: string;
  endpoint_id?: number;
  since?: Date;
  until?: Date;
  limit: number;
  cursor?: string;
}

/** `POST /events` body (docs/design.md §11.1): `{event, payload, user_id?}`. */
export const publishEventBody = validatedBy(
  {
    type: 'object',
    required: ['event', 'payload'],
    additionalProperties: false,
    properties: {
      event: { type: 'string', description: `A name from GET /api/v1/event-types; ${RESERVED}.` },
      payload: payloadSchema,
      user_id: { type: 'integer', minimum: 1, maximum: 99999, description: "Also fan out to this user's own endpoints." },
    },
  },
  Joi.object({
    event: Joi.string().min(1).max(100).required(),
    payload: payloadJoi.required(),
    user_id: Joi.number().integer().min(1).max(99999),
  })
    .required()
    .unknown(false),
);

export interface PublishEventBody {
  event: string;
  payload: object | string;
  user_id?: number;
}

/** `POST /event-types` body (docs/design.md §11.1): `{name, description?, schema?}`. */
export const createEventTypeBody = validatedBy(
  {
    type: 'object',
    required: ['name'],
    additionalProperties: false,
    properties: {
      name: { type: 'string', pattern: EVENT_TYPE_NAME.source, maxLength: 100, description: `Lowercase and dotted, e.g. \`invoice.paid\`; ${RESERVED}.` },
      description: { type: 'string', maxLength: 1000, nullable: true },
      schema: { type: 'object', additionalProperties: true, description: "A JSON Schema of the event's data." },
    },
  },
  Joi.object({
    name: Joi.string()
      .max(100)
      .pattern(EVENT_TYPE_NAME)
      .required()
      .messages({ 'string.pattern.base': '"name" must be lowercase and dotted, such as invoice.paid' }),
    description: Joi.string().max(1000).allow('', null),
    schema: Joi.object().unknown(true),
  })
    .required()
    .unknown(false),
);

export interface CreateEventTypeBody {
  name: string;
  description?: string | null;
  schema?: object;
}

/** One entry of the event catalog. */
export const eventTypeObject = {
  type: 'object',
  required: ['name', 'description', 'schema'],
  properties: {
    name: { type: 'string' },
    description: { type: 'string', nullable: true },
    schema: { type: 'object', additionalProperties: true, nullable: true, description: "A JSON Schema of the event's data." },
  },
} as const;
