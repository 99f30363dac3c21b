import type { HmacAlgo } from './signing';

/** What `WebhookRequest.enqueue()` hands to the queue side: everything the worker signs and sends later. */
export interface WebhookToEnqueue {
  url: string;
  event: string;
  /** The `_data` section: any JSON value, or a raw JSON string. */
  payload: unknown;
  /** Upper case; the queue side refuses a method it cannot send. */
  method: string;
  headers: Record<string, string>;
  secret: string;
  algo: HmacAlgo;
  signatureHeader: string;
}

/**
 * Where `enqueue(producer)` writes and queues. Empty here, since this folder loads no database or
 * queue code; the queue side (shared/deliveries/webhook-producer.ts) adds its fields (`db`,
 * `queue`, ...) by declaration merging, as a Fastify plugin declares its decorators.
 */
export interface EnqueueTarget {}

/**
 * The queue side of `WebhookRequest.enqueue()`, registered once by the module that owns it
 * (shared/deliveries/webhook-producer.ts) with `WebhookRequest.bindQueue()`.
 */
export interface WebhookQueueBinding {
  /**
   * Records and queues one webhook.
   * @param target - the caller's producer; undefined means the process-wide default one
   * @returns the delivery id (`msg_...`)
   */
  enqueue(webhook: WebhookToEnqueue, target: EnqueueTarget | undefined): Promise<string>;
  /** Closes the process-wide default producer, if one is open. */
  closeDefaultProducer(): Promise<void>;
}
