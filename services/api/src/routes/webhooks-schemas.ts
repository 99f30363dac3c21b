import Joi from 'joi';
import { WEBHOOK_METHODS } from '../../../../shared/queue';
import { validatedBy } from '../schemas/joi-validation';

/** `POST /webhooks` body (DESIGN §6): `{url, event, payload, method?, headers?, secret?}`. */
const enqueueJoi = Joi.object({
  url: Joi.string().uri({ scheme: ['http', 'https'] }).max(2048).required(),
  event: Joi.string().min(1).max(200).required(),
  payload: Joi.alternatives(Joi.object().min(1), Joi.array().min(1), Joi.string().min(1)).required(),
  method: Joi.string()
    .uppercase()
    .valid(...WEBHOOK_METHODS),
  // Header names are RFC 9110 tokens; a bounded number of short values keeps rows small.
  headers: Joi.object()
    .pattern(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, Joi.string().max(4096))
    .max(50),
  secret: Joi.string().min(1).max(1024),
})
  .required()
  .unknown(false);

/** The same body as JSON Schema, for the OpenAPI document; Joi above validates it. */
export const enqueueBody = validatedBy(
  {
    type: 'object',
    required: ['url', 'event', 'payload'],
    additionalProperties: false,
    properties: {
      url: { type: 'string', format: 'uri', maxLength: 2048 },
      event: { type: 'string', minLength: 1, maxLength: 200 },
      payload: { description: 'A non-empty object, array, or raw JSON string; sent as `_data` of the envelope.' },
      method: { type: 'string', enum: [...WEBHOOK_METHODS] },
      headers: { type: 'object', additionalProperties: { type: 'string', maxLength: 4096 }, maxProperties: 50 },
      secret: { type: 'string', minLength: 1, maxLength: 1024 },
    },
  },
  enqueueJoi,
);

/** `:id` of the delivery routes. */
export const deliveryParams = validatedBy(
  { type: 'object', required: ['id'], properties: { id: { type: 'string', minLength: 1, maxLength: 200 } } },
  Joi.object({ id: Joi.string().min(1).max(200).required() }),
);

/** JSON Schema of the `{"id": "<delivery id>"}` answers (202). */
export const idResponse = {
  type: 'object',
  properties: { id: { type: 'string' } },
  required: ['id'],
} as const;

export interface EnqueueBody {
  url: string;
  event: string;
  payload: object | string;
  method?: (typeof WEBHOOK_METHODS)[number];
  headers?: Record<string, string>;
  secret?: string;
}
