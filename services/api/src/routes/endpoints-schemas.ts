import Joi from 'joi';
import { validatedBy } from '../schemas/joi-validation';

// Bodies of the endpoint routes (docs/design.md §11.1); the JSON Schemas document them, Joi validates.

const url = Joi.string().uri({ scheme: ['http', 'https'] }).max(2048);
const events = Joi.array().items(Joi.string().min(1).max(100)).max(100);
const description = Joi.string().max(1000).allow('', null);

const urlSchema = { type: 'string', format: 'uri', maxLength: 2048, description: 'http:// or https://' } as const;
const eventsSchema = {
  type: 'array',
  items: { type: 'string' },
  maxItems: 100,
  description: 'Event type names from GET /api/v1/event-types; empty or absent: every event.',
} as const;
const descriptionSchema = { type: 'string', maxLength: 1000, nullable: true } as const;
// The rules of docs/design.md §14.1 (names, reserved, masking, 4 KB) are shared/operations' own, with messages naming the header.
const headers = Joi.object().pattern(/./, Joi.any());
const ordering = Joi.string().valid('unordered', 'fifo');
const rateLimitPerS = Joi.number().strict().integer().min(1).max(10000).allow(null);
// Its size and depth are shared/operations' own checks, with messages naming the field.
const filter = Joi.object().unknown(true).allow(null);
const filterSchema = {
  type: 'object',
  nullable: true,
  additionalProperties: true,
  description:
    'Matched against each event\'s data before a delivery is made: every key must match (a missing key never does); a scalar equals, type-strict; an array is any-of; an object matches recursively; a data array matches when one of its elements does. At most 4 KB and 5 levels of objects and arrays; null: every event.',
} as const;
const headersSchema = {
  type: 'object',
  additionalProperties: { type: 'string' },
  description:
    'Static headers sent with every delivery, e.g. `{"authorization": "Basic ..."}`: HTTP token names (stored lowercase), printable values, 4 KB in all; the signature headers and the names HTTP owns (content-type, content-length, content-encoding, transfer-encoding, host, connection, keep-alive, proxy-connection, proxy-authorization, upgrade, te, trailer, expect) are refused. A PATCH replaces the whole map; "********" keeps a stored masked value, except in a PATCH that moves `url` to another origin, which must give the masked values again (400 naming them otherwise).',
} as const;
const rateLimitSchema = {
  type: 'integer',
  minimum: 1,
  maximum: 10000,
  nullable: true,
  description: 'Attempts started per second at most, across all workers (burst: a tenth of it); a delivery over it waits without using an attempt. null: no limit.',
} as const;
const orderingSchema = {
  type: 'string',
  enum: ['unordered', 'fifo'],
  description: '`fifo`: one delivery at a time, in the order the events were made (default `unordered`).',
} as const;

// Their rules (fields, masking, origins, PEM parsing, https) are shared/operations' own, with messages naming the field.
const auth = Joi.object().unknown(true).allow(null);
const clientCertificate = Joi.object().unknown(true).allow(null);
const authSchema = {
  type: 'object',
  nullable: true,
  required: ['type', 'token_url', 'client_id', 'client_secret'],
  additionalProperties: false,
  properties: {
    type: { type: 'string', enum: ['oauth2_client_credentials'] },
    token_url: { type: 'string', format: 'uri', maxLength: 2048, description: 'The token endpoint (http or https; https in production unless allowlisted).' },
    client_id: { type: 'string', minLength: 1, maxLength: 1024 },
    client_secret: {
      type: 'string',
      minLength: 1,
      maxLength: 1024,
      description: 'Reads as "********"; sent back so in a PATCH, it keeps the stored secret, unless `token_url` or `url` moves to another origin.',
    },
    scope: { type: 'string', maxLength: 1024, nullable: true, description: 'Space-separated scopes (RFC 6749 §3.3).' },
    audience: { type: 'string', maxLength: 2048, nullable: true, description: 'Sent as `audience` in the token request, for servers that want it.' },
  },
  description:
    'OAuth2 client credentials (RFC 6749 §4.4, client authentication by HTTP Basic): the worker gets an access token from `token_url`, caches it until shortly before it expires, and sends `Authorization: Bearer <token>` with each delivery; a 401 from the endpoint gets one fresh token and one more try in the same attempt. Not together with an `authorization` header. A PATCH replaces it whole; null removes it.',
} as const;
const clientCertificateSchema = {
  type: 'object',
  nullable: true,
  required: ['cert', 'key'],
  additionalProperties: false,
  properties: {
    cert: { type: 'string', maxLength: 16384, description: 'PEM certificate (-----BEGIN CERTIFICATE-----), optionally followed by its chain.' },
    key: {
      type: 'string',
      maxLength: 16384,
      description: 'Its unencrypted PEM private key; never shown. "********" in a PATCH keeps the stored key (for a renewed certificate of the same key).',
    },
  },
  description:
    'A client certificate the worker presents for mutual TLS to the endpoint\'s own origin (https `url` only; never to `token_url` or the egress proxy). Reads show `{subject, not_after}`. null removes it.',
} as const;

const signatureSchemeSchema = {
  type: 'string',
  enum: ['hmac-sha256', 'ed25519'],
  description:
    '`hmac-sha256` (default): X-Signature and Standard Webhooks `v1`. `ed25519`: Standard Webhooks `v1a` asymmetric signatures, no X-Signature; the endpoint gets a key pair and its receiver verifies with the `whpk_` public key. Set on create.',
} as const;

/** `POST /endpoints` `{url, events?, description?, headers?, ordering?, rate_limit_per_s?, filter?, signature_scheme?, secret?, auth?, client_certificate?}`. */
export const createEndpointBody = validatedBy(
  {
    type: 'object',
    required: ['url'],
    additionalProperties: false,
    properties: {
      url: urlSchema,
      events: eventsSchema,
      description: descriptionSchema,
      headers: headersSchema,
      ordering: orderingSchema,
      rate_limit_per_s: rateLimitSchema,
      filter: filterSchema,
      signature_scheme: signatureSchemeSchema,
      auth: authSchema,
      client_certificate: clientCertificateSchema,
      secret: {
        type: 'string',
        minLength: 1,
        maxLength: 1024,
        description:
          'Default: `whsec_` + base64 of 32 random bytes; for ed25519 a fresh key pair, or your own `whsk_` private key (base64 of the 32-byte seed, or of 64 bytes seed then public key).',
      },
    },
  },
  Joi.object({
    url: url.required(),
    events,
    description,
    headers,
    ordering,
    rate_limit_per_s: rateLimitPerS,
    filter,
    signature_scheme: Joi.string().valid('hmac-sha256', 'ed25519'),
    secret: Joi.string().min(1).max(1024),
    auth,
    client_certificate: clientCertificate,
  })
    .required()
    .unknown(false),
);

/** `PATCH /endpoints/{id}` `{url?, events?, description?, active?, headers?, ordering?, rate_limit_per_s?, filter?, auth?, client_certificate?}`, at least one. */
export const updateEndpointBody = validatedBy(
  {
    type: 'object',
    minProperties: 1,
    additionalProperties: false,
    properties: {
      url: urlSchema,
      events: eventsSchema,
      description: descriptionSchema,
      active: { type: 'boolean', description: '`true` re-enables the endpoint and clears `disabled_reason`.' },
      headers: headersSchema,
      ordering: orderingSchema,
      rate_limit_per_s: rateLimitSchema,
      filter: filterSchema,
      auth: authSchema,
      client_certificate: clientCertificateSchema,
    },
  },
  Joi.object({ url, events, description, active: Joi.boolean(), headers, ordering, rate_limit_per_s: rateLimitPerS, filter, auth, client_certificate: clientCertificate })
    .min(1)
    .required()
    .unknown(false),
);

/** `POST /endpoints/{id}/rotate-secret` `{overlap_hours?}`. */
export const rotateSecretBody = validatedBy(
  {
    type: 'object',
    additionalProperties: false,
    properties: {
      overlap_hours: {
        type: 'number',
        minimum: 0,
        maximum: 168,
        default: 24,
        description: 'How long the old secret also signs deliveries, hours.',
      },
    },
  },
  Joi.object({ overlap_hours: Joi.number().min(0).max(168).default(24) }).unknown(false),
);

/** `POST /endpoints/{id}/recover` `{since}`. */
export const recoverBody = validatedBy(
  {
    type: 'object',
    required: ['since'],
    additionalProperties: false,
    properties: {
      since: {
        type: 'string',
        format: 'date-time',
        description: 'ISO 8601: failed deliveries whose last attempt is at or after this are attempted again.',
      },
    },
  },
  Joi.object({ since: Joi.date().iso().required() }).required().unknown(false),
);

/** `POST /endpoints/{id}/replay` (docs/design.md §14.1). */
export const replayBody = validatedBy(
  {
    type: 'object',
    required: ['since'],
    additionalProperties: false,
    properties: {
      since: {
        type: 'string',
        format: 'date-time',
        description:
          'ISO 8601: post changes and fan-out events made at or after this that the endpoint would receive now and never got are delivered, oldest first. At most WEBHOOK_RETENTION_DAYS minus one day ago.',
      },
    },
  },
  Joi.object({ since: Joi.date().iso().required() }).required().unknown(false),
);

export interface CreateEndpointBody {
  url: string;
  events?: string[];
  description?: string | null;
  headers?: Record<string, unknown>;
  ordering?: 'unordered' | 'fifo';
  rate_limit_per_s?: number | null;
  filter?: Record<string, unknown> | null;
  signature_scheme?: 'hmac-sha256' | 'ed25519';
  secret?: string;
  auth?: Record<string, unknown> | null;
  client_certificate?: Record<string, unknown> | null;
}

export interface UpdateEndpointBody {
  url?: string;
  events?: string[];
  description?: string | null;
  active?: boolean;
  headers?: Record<string, unknown>;
  ordering?: 'unordered' | 'fifo';
  rate_limit_per_s?: number | null;
  filter?: Record<string, unknown> | null;
  auth?: Record<string, unknown> | null;
  client_certificate?: Record<string, unknown> | null;
}
