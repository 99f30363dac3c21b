/** Options every worker error accepts: the lower-level error that caused it. */
export interface WorkerErrorOptions {
  cause?: unknown;
}

/** An attempt was recorded for a delivery that no longer exists (pruned meanwhile); nothing was written. */
export class DeliveryGoneError extends Error {
  constructor(deliveryId: string, options: WorkerErrorOptions = {}) {
    super(`Delivery ${deliveryId} no longer exists.`, options);
    this.name = 'DeliveryGoneError';
  }
}
