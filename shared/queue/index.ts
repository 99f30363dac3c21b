export * from './deliveries';
export * from './errors';
export * from './fan-out';
export * from './outbox';
export * from './partitions';
export * from './webhook-queue';
