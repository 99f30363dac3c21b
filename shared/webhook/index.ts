export * from './errors';
export * from './signing';
export { encodeJson } from './envelope';
export * from './verify-incoming';
export * from './http-client';
export * from './webhook-request';
