import Joi from 'joi';
import { validatedBy } from '../schemas/joi-validation';

// JSON Schemas shared by the operations routes (docs/design.md §11.1). They document the routes in
// OpenAPI and shape the replies (Fastify serialises with them); Joi validates the input.

/** Who may call: a service key, or a user's bearer token with their user id (docs/design.md §4). */
export const SECURITY: Array<Record<string, string[]>> = [{ bearerToken: [] }, { bearerToken: [], userIdHeader: [] }];
/** Routes only service keys may use. */
export const SERVICE_KEY_SECURITY: Array<Record<string, string[]>> = [{ bearerToken: [] }];

const errorBody = {
  type: 'object',
  description: "The layout's error shape: Layout A `{status, message}`, Layout B `{message}`.",
  properties: { status: { type: 'integer' }, message: { type: 'string' } },
  // No `required`: fast-json-stringify writes required properties first, which would turn
  // Layout A's `{"status","message"}` into `{"message","status"}` on the wire.
  additionalProperties: true,
} as const;

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: 'Invalid request',
  401: 'Missing or invalid credentials',
  403: 'The service key lacks the scope, or a user token on a service-key route',
  404: "Not found, or another principal's",
  409: 'Conflict with the current state',
  429: 'Rate limited',
  503: 'The queue or database is unavailable; retry later',
};

/** Response schemas of the given error statuses, plus 401 and 429 that every route may answer. */
export function errorResponses(...statuses: number[]): Record<number, object> {
  const all = [...new Set([400, 401, 429, ...statuses])].sort();
  return Object.fromEntries(all.map((status) => [status, { ...errorBody, description: ERROR_DESCRIPTIONS[status] }]));
}

const nullableString = { type: 'string', nullable: true } as const;
const nullableTime = { type: 'string', format: 'date-time', nullable: true } as const;

/** The endpoint object of docs/design.md §11.1. */
export const endpointObject = {
  type: 'object',
  required: ['id', 'url', 'events', 'description', 'active', 'disabled_reason', 'user_id', 'headers', 'ordering', 'rate_limit_per_s', 'filter', 'signature_scheme', 'public_key', 'auth', 'client_certificate', 'created_at', 'updated_at'],
  properties: {
    id: { type: 'integer' },
    url: { type: 'string' },
    events: { type: 'array', items: { type: 'string' }, description: 'Empty: every event.' },
    description: nullableString,
    active: { type: 'boolean' },
    disabled_reason: nullableString,
    user_id: { type: 'integer', nullable: true, description: 'The owning user; null for an operator endpoint.' },
    headers: {
      type: 'object',
      additionalProperties: { type: 'string' },
      description: 'Sent with every delivery; names lowercase. Values of authorization, cookie and names containing key, token, secret or auth read as "********".',
    },
    ordering: { type: 'string', enum: ['unordered', 'fifo'], description: '`fifo`: one delivery at a time, in the order the events were made.' },
    rate_limit_per_s: { type: 'integer', nullable: true, description: 'Attempts started per second at most, across all workers; null: no limit.' },
    filter: {
      type: 'object',
      nullable: true,
      additionalProperties: true,
      description: 'Matched against each event\'s data before a delivery is made; null: every event.',
    },
    signature_scheme: {
      type: 'string',
      enum: ['hmac-sha256', 'ed25519'],
      description: '`hmac-sha256`: X-Signature and `v1`; `ed25519`: Standard Webhooks `v1a`, verified with `public_key`.',
    },
    public_key: { ...nullableString, description: 'An ed25519 endpoint\'s `whpk_` public key; null for HMAC.' },
    auth: {
      type: 'object',
      nullable: true,
      required: ['type', 'token_url', 'client_id', 'client_secret', 'scope', 'audience'],
      properties: {
        type: { type: 'string', enum: ['oauth2_client_credentials'] },
        token_url: { type: 'string' },
        client_id: { type: 'string' },
        client_secret: { type: 'string', description: 'Always "********".' },
        scope: nullableString,
        audience: nullableString,
      },
      description: 'OAuth2 client credentials the worker gets a bearer token with for each delivery; null: none.',
    },
    client_certificate: {
      type: 'object',
      nullable: true,
      required: ['subject', 'not_after'],
      properties: {
        subject: { type: 'string', description: 'The certificate\'s subject, e.g. `CN=sender.example`.' },
        not_after: { ...nullableTime, description: 'When the certificate expires.' },
      },
      description: 'The certificate presented for mutual TLS (never its key); null: none.',
    },
    created_at: { type: 'string', format: 'date-time' },
    updated_at: { type: 'string', format: 'date-time' },
  },
} as const;

/** The delivery object of docs/design.md §11.1. */
export const deliveryObject = {
  type: 'object',
  required: [
    'id',
    'endpoint_id',
    'event_id',
    'url',
    'event',
    'status',
    'attempt_count',
    'next_attempt_at',
    'last_status_code',
    'last_error',
    'created_at',
    'delivered_at',
  ],
  properties: {
    id: { type: 'string', description: 'The webhook-id, stable across attempts.' },
    endpoint_id: { type: 'integer', nullable: true, description: 'Null for an ad-hoc send.' },
    event_id: { ...nullableString, description: 'The event delivered (evt_...), its body stored once; null for a delivery made before events were stored.' },
    url: { type: 'string' },
    event: nullableString,
    status: { type: 'string', enum: ['pending', 'delivering', 'succeeded', 'failed'] },
    attempt_count: { type: 'integer' },
    next_attempt_at: nullableTime,
    last_status_code: { type: 'integer', nullable: true },
    last_error: nullableString,
    created_at: { type: 'string', format: 'date-time' },
    delivered_at: nullableTime,
  },
} as const;

/** One HTTP attempt of a delivery (docs/design.md §11.1). */
export const attemptObject = {
  type: 'object',
  required: ['number', 'url', 'status_code', 'error', 'duration_ms', 'response_excerpt', 'created_at'],
  properties: {
    number: { type: 'integer' },
    url: { ...nullableString, description: "Where the attempt went: its endpoint's URL when it started (null for attempts recorded before attempts kept it)." },
    status_code: { type: 'integer', nullable: true },
    error: nullableString,
    duration_ms: { type: 'integer' },
    response_excerpt: { ...nullableString, description: 'The first 2 KB of the answer.' },
    created_at: { type: 'string', format: 'date-time' },
  },
} as const;

/** A page of a list: `{"data":[...],"next_cursor":"<opaque>"|null}`. */
export function pageOf(item: object): object {
  return {
    type: 'object',
    required: ['data', 'next_cursor'],
    properties: {
      data: { type: 'array', items: item },
      next_cursor: { type: 'string', nullable: true, description: 'Pass as `cursor` for the next page; null on the last.' },
    },
  };
}

/** `?limit=` (1..100, default 20) and `?cursor=` of every list. */
export const PAGE_QUERY_JOI = {
  limit: Joi.number().integer().min(1).max(100).default(20),
  cursor: Joi.string().min(1).max(500),
};

export const PAGE_QUERY_PROPERTIES = {
  limit: { type: 'integer', minimum: 1, maximum: 100, default: 20 },
  cursor: { type: 'string', description: 'The `next_cursor` of the previous page.' },
} as const;

/** `?limit=&cursor=` alone. */
export const pageQuery = validatedBy({ type: 'object', properties: PAGE_QUERY_PROPERTIES }, Joi.object(PAGE_QUERY_JOI).unknown(true));

/** `:id` of an endpoint; anything but a positive integer is simply not found. */
export const endpointParams = validatedBy(
  { type: 'object', required: ['id'], properties: { id: { type: 'integer', minimum: 1 } } },
  Joi.object({ id: Joi.string().required() }),
);

/** `{"id": "<delivery id>"}` answers (202). */
export const idResponse = {
  type: 'object',
  properties: { id: { type: 'string', description: 'The delivery id (webhook-id).' } },
  required: ['id'],
} as const;

export interface PageQuery {
  limit: number;
  cursor?: string;
}
