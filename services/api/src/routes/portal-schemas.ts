import Joi from 'joi';
import type { PortalScope } from '../../../../shared/db';
import { PORTAL_LINK_LIMITS } from '../portal/portal-links';
import { validatedBy } from '../schemas/joi-validation';
import { PAGE_QUERY_JOI, PAGE_QUERY_PROPERTIES } from './operations-schemas';

// Bodies, queries and answers of the portal routes (docs/design.md §11.6); the JSON Schemas
// document them in OpenAPI and shape the replies, Joi validates.

const { minTtlS, maxTtlS, defaultTtlS, defaultSessionTtlS, defaultScope } = PORTAL_LINK_LIMITS;
const SCOPES: PortalScope[] = ['manage', 'read'];
const userIdSchema = { type: 'integer', minimum: 1, maximum: 99999 } as const;
const time = { type: 'string', format: 'date-time' } as const;
const nullableTime = { ...time, nullable: true } as const;
const scopeSchema = {
  type: 'string',
  enum: SCOPES,
  description: '`manage`: the GET routes and the changes (create, change, delete, test, rotate, recover, replay, redeliver); `read`: the GET routes only.',
} as const;

/** `POST /portal-links` `{user_id, scope?, ttl_s?, session_ttl_s?}`. */
export const createPortalLinkBody = validatedBy(
  {
    type: 'object',
    required: ['user_id'],
    additionalProperties: false,
    properties: {
      user_id: { ...userIdSchema, description: 'The user whose endpoints and deliveries the link opens.' },
      scope: { ...scopeSchema, default: defaultScope },
      ttl_s: { type: 'integer', minimum: minTtlS, maximum: maxTtlS, default: defaultTtlS, description: 'Seconds the link can be opened in.' },
      session_ttl_s: {
        type: 'integer',
        minimum: minTtlS,
        maximum: maxTtlS,
        default: defaultSessionTtlS,
        description: 'Seconds the session it opens lasts, from the opening.',
      },
    },
  },
  Joi.object({
    user_id: Joi.number().integer().min(1).max(99999).required(),
    scope: Joi.string().valid(...SCOPES).default(defaultScope),
    ttl_s: Joi.number().integer().min(minTtlS).max(maxTtlS).default(defaultTtlS),
    session_ttl_s: Joi.number().integer().min(minTtlS).max(maxTtlS).default(defaultSessionTtlS),
  })
    .required()
    .unknown(false),
);

export interface CreatePortalLinkBody {
  user_id: number;
  scope: PortalScope;
  ttl_s: number;
  session_ttl_s: number;
}

/** 201 of `POST /portal-links`. */
export const mintedPortalLink = {
  type: 'object',
  required: ['id', 'url', 'expires_at'],
  properties: {
    id: { type: 'integer' },
    url: { type: 'string', description: '`<APP_URL>/portal#token=<token>`: hand it to the user; it opens once. The token is shown only here.' },
    expires_at: { ...time, description: 'The link cannot be opened after this.' },
  },
} as const;

/** A listed link: its state, never its token. */
export const portalLinkObject = {
  type: 'object',
  required: ['id', 'user_id', 'scope', 'session_ttl_s', 'expires_at', 'used_at', 'revoked_at', 'created_at'],
  properties: {
    id: { type: 'integer' },
    user_id: { type: 'integer' },
    scope: scopeSchema,
    session_ttl_s: { type: 'integer' },
    expires_at: time,
    used_at: { ...nullableTime, description: 'When it was opened; null while unused.' },
    revoked_at: { ...nullableTime, description: 'When it was deleted, ending its session; null otherwise.' },
    created_at: time,
  },
} as const;

/** `GET /portal-links?user_id=&limit=&cursor=`. */
export const listPortalLinksQuery = validatedBy(
  { type: 'object', required: ['user_id'], properties: { user_id: userIdSchema, ...PAGE_QUERY_PROPERTIES } },
  Joi.object({ user_id: Joi.number().integer().min(1).max(99999).required(), ...PAGE_QUERY_JOI }).unknown(true),
);

export interface ListPortalLinksQuery {
  user_id: number;
  limit: number;
  cursor?: string;
}

/** `:id` of a portal link; anything but a positive integer is simply not found. */
export const portalLinkParams = validatedBy(
  { type: 'object', required: ['id'], properties: { id: { type: 'integer', minimum: 1 } } },
  Joi.object({ id: Joi.string().required() }),
);

/** `POST /portal-sessions` `{token}`. */
export const openPortalSessionBody = validatedBy(
  {
    type: 'object',
    required: ['token'],
    additionalProperties: false,
    properties: { token: { type: 'string', maxLength: 200, description: 'The token from the fragment of a portal link (`#token=...`).' } },
  },
  Joi.object({ token: Joi.string().min(1).max(200).required() }).required().unknown(false),
);

/** 201 of `POST /portal-sessions`. */
export const openedPortalSession = {
  type: 'object',
  required: ['token', 'user_id', 'scope', 'expires_at'],
  properties: {
    token: { type: 'string', description: '`ps_...`: send as `Authorization: Bearer ps_...` with no user id header. Shown only here.' },
    user_id: { type: 'integer' },
    scope: scopeSchema,
    expires_at: { ...time, description: 'The session ends then, or earlier when its link is deleted.' },
  },
} as const;
