import Joi from 'joi';
import { WEBHOOK_METHODS } from '../../../../shared/queue';

/** `POST /webhooks` body (DESIGN §6): `{url, event, payload, method?, headers?, secret?}`. */
export const enqueueBody = Joi.object({
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

/** `:id` of the delivery routes. */
export const deliveryParams = Joi.object({
  id: Joi.string().min(1).max(200).required(),
});

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
