import type { FastifyError, FastifyRequest, preValidationAsyncHookHandler } from 'fastify';
import {
  EndpointDisabledError,
  EndpointLimitError,
  EndpointNotFoundError,
  EventTypeExistsError,
  InvalidCursorError,
  InvalidEndpointError,
  ReplayWindowError,
  ReservedEventNameError,
  UnknownEventTypeError,
} from '../../../../shared/operations';
import { DeliveryInProgressError, DeliveryNotFoundError, InvalidWebhookError, QueueUnavailableError } from '../../../../shared/queue';
import { EncryptionError, LogicError } from '../../../../shared/webhook/errors';
import { ApiError } from '../errors';
import { requireServiceScope, visibilityFor } from '../plugins/principal';
import type { Scope } from '../users/scopes';

/**
 * The error handler of the operations routes: maps the domain errors of shared/operations
 * and shared/queue to client-safe ApiErrors; rethrown, they reach the layout's own error
 * handler, which answers in the layout's shape (A `{status,message}`, B `{message}`).
 * 400 invalid, 403 a user's endpoint limit reached, 404 unknown or another principal's, 409 conflicting state, 503 queue away.
 */
export async function handleOperationsError(error: FastifyError): Promise<never> {
  if (error.validation || error.code === 'FST_ERR_VALIDATION') throw new ApiError(400, error.message, { cause: error });
  if (
    error instanceof InvalidWebhookError ||
    error instanceof EncryptionError ||
    error instanceof LogicError ||
    error instanceof InvalidEndpointError ||
    error instanceof UnknownEventTypeError ||
    error instanceof InvalidCursorError ||
    error instanceof ReplayWindowError ||
    error instanceof ReservedEventNameError
  ) {
    throw new ApiError(400, error.message, { cause: error });
  }
  if (error instanceof EndpointLimitError) throw new ApiError(403, error.message, { cause: error });
  if (error instanceof DeliveryNotFoundError) throw new ApiError(404, 'Webhook delivery not found.', { cause: error });
  if (error instanceof EndpointNotFoundError) throw new ApiError(404, 'Endpoint not found.', { cause: error });
  if (error instanceof DeliveryInProgressError || error instanceof EndpointDisabledError || error instanceof EventTypeExistsError) {
    throw new ApiError(409, error.message, { cause: error });
  }
  if (error instanceof QueueUnavailableError) {
    throw new ApiError(503, 'The webhook queue is unavailable; try again later.', { cause: error });
  }
  throw error;
}

/**
 * A preValidation hook for routes only service keys may use: a user token or a key without
 * `scope` gets its 403 before the body is even validated.
 */
export function serviceKeyWith(scope: Scope): preValidationAsyncHookHandler {
  return async (request: FastifyRequest) => {
    requireServiceScope(request, scope);
  };
}

/** A preValidation hook for routes operators (with `scope`) and users share: a key without it gets 403 first. */
export function operatorOrUser(scope: Scope): preValidationAsyncHookHandler {
  return async (request: FastifyRequest) => {
    visibilityFor(request, scope);
  };
}

/** An endpoint id from the path; anything but a positive 32-bit integer is simply not found. */
export function endpointIdOf(raw: string): number {
  const id = /^\d{1,10}$/.test(raw) ? Number(raw) : NaN;
  if (!(id >= 1 && id <= 2 ** 31 - 1)) throw new EndpointNotFoundError(0);
  return id;
}
