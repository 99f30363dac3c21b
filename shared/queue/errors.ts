/** Options every queue error accepts: the lower-level error that caused it. */
export interface QueueErrorOptions {
  cause?: unknown;
}

/** Redis is not connected, so a job could not be added now; the outbox relay adds it later. */
export class QueueUnavailableError extends Error {
  constructor(message: string, options: QueueErrorOptions = {}) {
    super(message, options);
    this.name = 'QueueUnavailableError';
  }
}

/** No delivery has this id, or it belongs to another user. */
export class DeliveryNotFoundError extends Error {
  readonly deliveryId: string;

  constructor(deliveryId: string, options: QueueErrorOptions = {}) {
    super(`Delivery ${deliveryId} was not found.`, options);
    this.name = 'DeliveryNotFoundError';
    this.deliveryId = deliveryId;
  }
}

/** A redelivery was asked for while the delivery is still pending or being delivered. */
export class DeliveryInProgressError extends Error {
  readonly deliveryId: string;

  constructor(deliveryId: string, options: QueueErrorOptions = {}) {
    super(`Delivery ${deliveryId} is still in progress; redeliver it once it has succeeded or failed.`, options);
    this.name = 'DeliveryInProgressError';
    this.deliveryId = deliveryId;
  }
}

/** A webhook to enqueue is malformed: bad URL, method, header or secret. */
export class InvalidWebhookError extends Error {
  constructor(message: string, options: QueueErrorOptions = {}) {
    super(message, options);
    this.name = 'InvalidWebhookError';
  }
}
