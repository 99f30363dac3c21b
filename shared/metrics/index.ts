export { createMetrics } from './registry';
export type { Metrics } from './registry';
export { metricsPlugin } from './fastify-plugin';
export type { MetricsPluginOptions } from './fastify-plugin';
