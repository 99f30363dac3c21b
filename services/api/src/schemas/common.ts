import { postIdParams, postIdParamsShortcut } from './post-input';
import { validatedBy } from './joi-validation';

/** OpenAPI security requirement of every authenticated route (schemes defined in the swagger plugin). */
export const AUTHENTICATED = [{ bearerToken: [], userIdHeader: [] }];

/** `{id}` path segment: digits only (the route pattern enforces it), validated and converted by Joi. */
export function postIdParamsSchema() {
  return validatedBy(
    { type: 'object', properties: { id: { type: 'integer', minimum: 1, description: 'Post id (pid)' } }, required: ['id'] },
    postIdParams,
    postIdParamsShortcut,
  );
}

export function messageSchema(description: string, extra: Record<string, object> = {}) {
  return {
    description,
    type: 'object',
    properties: { ...extra, message: { type: 'string' } },
    required: [...Object.keys(extra), 'message'],
  };
}

/** A 204 or other empty answer. */
export const EMPTY = { description: 'No content', type: 'null' };
