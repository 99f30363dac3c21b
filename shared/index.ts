// The package's entry (package.json "main"): the webhook helper with its queue side loaded, so
// `new WebhookRequest(url)...enqueue()` works. Code that only signs, sends or verifies imports
// `shared/webhook`, which loads neither Sequelize nor BullMQ.
export * from './webhook';
export * from './deliveries/webhook-producer';
export { WEBHOOK_METHODS, enqueueWebhook, type EnqueueWebhookOptions, type WebhookMethod } from './deliveries/enqueue';
export { InvalidWebhookError } from './queue/errors';
