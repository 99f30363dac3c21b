/** Options every operations error accepts: the lower-level error that caused it. */
export interface OperationsErrorOptions {
  cause?: unknown;
}

/** No endpoint has this id, it was deleted, or it belongs to someone the caller may not see. */
export class EndpointNotFoundError extends Error {
  readonly endpointId: number;

  constructor(endpointId: number, options: OperationsErrorOptions = {}) {
    super(`Endpoint ${endpointId} was not found.`, options);
    this.name = 'EndpointNotFoundError';
    this.endpointId = endpointId;
  }
}

/** A redelivery or recovery asked of an endpoint that is disabled; enable it first. */
export class EndpointDisabledError extends Error {
  readonly endpointId: number;

  constructor(endpointId: number, options: OperationsErrorOptions = {}) {
    super(`Endpoint ${endpointId} is disabled; enable it first.`, options);
    this.name = 'EndpointDisabledError';
    this.endpointId = endpointId;
  }
}

/** Event names that are not in the catalog (docs/design.md §11.1); the message names every one. */
export class UnknownEventTypeError extends Error {
  readonly names: readonly string[];

  constructor(names: readonly string[], options: OperationsErrorOptions = {}) {
    super(`Unknown event ${names.length === 1 ? 'type' : 'types'}: ${names.join(', ')}.`, options);
    this.name = 'UnknownEventTypeError';
    this.names = names;
  }
}

/** An event type of this name is already in the catalog. */
export class EventTypeExistsError extends Error {
  constructor(readonly eventName: string, options: OperationsErrorOptions = {}) {
    super(`Event type ${eventName} already exists.`, options);
    this.name = 'EventTypeExistsError';
  }
}

/** The name of an operational event (docs/design.md §6.6): only the system sends those. */
export class ReservedEventNameError extends Error {
  constructor(readonly eventName: string, options: OperationsErrorOptions = {}) {
    super(`Event ${eventName} is reserved: the system sends it about endpoints and deliveries (an operational event).`, options);
    this.name = 'ReservedEventNameError';
  }
}

/** An endpoint's URL or secret cannot be used. */
export class InvalidEndpointError extends Error {
  constructor(message: string, options: OperationsErrorOptions = {}) {
    super(message, options);
    this.name = 'InvalidEndpointError';
  }
}

/** A list cursor that this API did not hand out (or that was altered). */
export class InvalidCursorError extends Error {
  constructor(options: OperationsErrorOptions = {}) {
    super('Invalid cursor.', options);
    this.name = 'InvalidCursorError';
  }
}

/** A replay's `since` lies outside what retention still holds (docs/design.md §14.1). */
export class ReplayWindowError extends Error {
  constructor(readonly retentionDays: number, options: OperationsErrorOptions = {}) {
    super(
      `since must be within the last ${Math.max(retentionDays - 1, 0)} day(s) (WEBHOOK_RETENTION_DAYS=${retentionDays} minus one): older events may already be gone.`,
      options,
    );
    this.name = 'ReplayWindowError';
  }
}

/** A user owns as many endpoints as MAX_ENDPOINTS_PER_USER allows (docs/design.md §11.2); the message names the limit. */
export class EndpointLimitError extends Error {
  constructor(readonly limit: number, options: OperationsErrorOptions = {}) {
    super(`Endpoint limit reached (${limit}).`, options);
    this.name = 'EndpointLimitError';
  }
}
