export * from './deliveries';
export * from './errors';
export * from './outbox';
export * from './partitions';
export * from './webhook-queue';
