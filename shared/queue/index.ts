export * from './deliveries';
export * from './errors';
export * from './outbox';
export * from './webhook-queue';
export * from './circuit-breaker';
