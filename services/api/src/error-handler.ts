import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { isDatabaseUnavailable } from '../../../shared/db';
import { ApiError } from './errors';
import { UnsupportedImageError } from '../../../shared/posts/images/errors';

/** Renders a status and a client-safe message in a layout's error shape. */
export type ErrorBody = (statusCode: number, message: string) => object;

// Fastify's and @fastify/multipart's own wording is written for developers; clients get these.
const CLIENT_MESSAGES: Record<string, string> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'Unsupported content type.',
  FST_ERR_CTP_BODY_TOO_LARGE: 'Request body is too large.',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'Request body is empty.',
  FST_ERR_CTP_INVALID_JSON_BODY: 'Malformed JSON body.',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'Invalid Content-Length.',
  FST_REQ_FILE_TOO_LARGE: 'Image cannot exceed 2 MB.',
  FST_FILES_LIMIT: 'Only one file may be uploaded.',
  FST_FIELDS_LIMIT: 'Too many form fields.',
  FST_PARTS_LIMIT: 'Too many form parts.',
};

/** Seconds a client should wait before retrying while PostgreSQL is unreachable (docs/design.md §6.7). */
export const DATABASE_RETRY_AFTER_S = 5;
/** An outage fails every request: its first failure is a warning, the rest of it debug lines. */
const OUTAGE_WARNING_INTERVAL_MS = 10_000;

/**
 * The one error handler, parameterised by the layout's shape. PostgreSQL unreachable, or a
 * standby answering during a failover (anywhere, the auth hooks included; docs/design.md §13.3): 503 `Service temporarily unavailable.` with
 * `Retry-After: 5` (docs/design.md §6.7). 4xx errors, and ApiErrors of any status (their messages are
 * client-safe by construction), keep their status and message; anything else is logged
 * with its stack and answered 500 without its message.
 */
export function createErrorHandler(body: ErrorBody) {
  let lastOutageWarning = 0;
  return function errorHandler(error: FastifyError, request: FastifyRequest, reply: FastifyReply) {
    if (isDatabaseUnavailable(error)) {
      const now = Date.now();
      if (now - lastOutageWarning >= OUTAGE_WARNING_INTERVAL_MS) {
        lastOutageWarning = now;
        request.log.warn({ reason: error.message }, 'PostgreSQL unreachable or not the primary (DATABASE_URL): answering 503');
      } else {
        request.log.debug({ reason: error.message }, 'PostgreSQL unreachable: answering 503');
      }
      reply.header('Retry-After', DATABASE_RETRY_AFTER_S);
      return reply.code(503).send(body(503, 'Service temporarily unavailable.'));
    }
    if (error instanceof UnsupportedImageError) return reply.code(415).send(body(415, error.message));
    const status = error.statusCode;
    if (error instanceof ApiError && error.statusCode >= 500) {
      request.log.warn({ err: error.cause ?? error, statusCode: error.statusCode }, 'request not served');
      return reply.code(error.statusCode).send(body(error.statusCode, error.message));
    }
    if (status === undefined || status < 400 || status >= 500) {
      request.log.error({ err: error }, 'request failed');
      return reply.code(500).send(body(500, 'Internal server error.'));
    }
    request.log.info({ code: error.code, statusCode: status, reason: error.message }, 'request refused');
    return reply.code(status).send(body(status, CLIENT_MESSAGES[error.code] ?? error.message));
  };
}
