export * from './errors';
export * from './signing';
export * from './reserved-headers';
export { idTime, newEventId } from './ids';
export * from './ed25519';
export { encodeJson } from './envelope';
export * from './verify-incoming';
export * from './http-client';
export * from './webhook-request';
// Types only: `createWebhookProducer` loads Sequelize and BullMQ, so it is imported from
// `shared/webhook/enqueue` by the code that wants them.
export type { WebhookProducer, WebhookProducerDeps } from './enqueue';
