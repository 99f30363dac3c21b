export * from './errors';
export * from './partitions';
export * from './webhook-queue';
