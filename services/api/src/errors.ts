/**
 * An error a route or hook throws to answer with a 4xx status and a client-safe message;
 * the layout's error handler renders it in the layout's shape.
 */
export class ApiError extends Error {
  constructor(
    readonly statusCode: number,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'ApiError';
  }
}

/**
 * A request part failed its Joi schema. `message` is the first failing rule's message
 * (docs/design.md §5). `structural` marks errors about the shape rather than a field rule
 * (not an object, unknown field), which Layout B answers with 400 instead of its 200 status body.
 */
export class RequestValidationError extends Error {
  readonly statusCode = 400;
  readonly code = 'FST_ERR_VALIDATION';
  constructor(
    message: string,
    readonly structural: boolean,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'RequestValidationError';
  }
}
