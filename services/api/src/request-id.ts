import { randomUUID } from 'node:crypto';
import type { RawRequestDefaultExpression } from 'fastify';

const CLIENT_REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/;

/**
 * Fastify's `genReqId`: the client's `x-request-id` when it is 1..64 characters of
 * `[A-Za-z0-9._-]` (docs/design.md §12), else a random UUID. The id lands in every log line of the
 * request and is echoed back, so nothing longer or stranger is taken from outside.
 */
export function requestIdOf(request: RawRequestDefaultExpression): string {
  const given = request.headers['x-request-id'];
  return typeof given === 'string' && CLIENT_REQUEST_ID.test(given) ? given : randomUUID();
}
