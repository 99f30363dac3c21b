export * from './cursor';
export * from './delivery-actions';
export * from './delivery-log';
export * from './endpoint-stats';
export * from './endpoints';
export * from './errors';
export * from './event-catalog';
export * from './viewer';
