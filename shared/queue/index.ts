export * from './errors';
export * from './shards';
export * from './webhook-queue';
