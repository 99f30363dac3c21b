import Joi from 'joi';
import { validatedBy } from '../schemas/joi-validation';

// Bodies of the endpoint routes (DESIGN §11); the JSON Schemas document them, Joi validates.

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

/** `POST /endpoints` `{url, events?, description?, secret?}`. */
export const createEndpointBody = validatedBy(
  {
    type: 'object',
    required: ['url'],
    additionalProperties: false,
    properties: {
      url: urlSchema,
      events: eventsSchema,
      description: descriptionSchema,
      secret: {
        type: 'string',
        minLength: 1,
        maxLength: 1024,
        description: 'Default: `whsec_` + base64 of 32 random bytes.',
      },
    },
  },
  Joi.object({ url: url.required(), events, description, secret: Joi.string().min(1).max(1024) }).required().unknown(false),
);

/** `PATCH /endpoints/{id}` `{url?, events?, description?, active?}`, at least one. */
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
    },
  },
  Joi.object({ url, events, description, active: Joi.boolean() }).min(1).required().unknown(false),
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

export interface CreateEndpointBody {
  url: string;
  events?: string[];
  description?: string | null;
  secret?: string;
}

export interface UpdateEndpointBody {
  url?: string;
  events?: string[];
  description?: string | null;
  active?: boolean;
}
