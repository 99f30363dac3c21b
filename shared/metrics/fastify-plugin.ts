import type {} from '@fastify/swagger';
import fp from 'fastify-plugin';
import type { Metrics } from './registry';

export interface MetricsPluginOptions {
  metrics: Metrics;
  /** Runs before each scrape, e.g. to read queue counts into gauges; a failure is logged, not fatal. */
  beforeScrape?: () => Promise<void>;
}

/**
 * Times every request into `http_request_duration_seconds` and serves `GET /metrics` in
 * the Prometheus text exposition format. Routes are labelled by their pattern
 * (`/api/v1/posts/:id`), never by the raw URL, so label cardinality stays bounded.
 */
export const metricsPlugin = fp<MetricsPluginOptions>(
  async (app, { metrics, beforeScrape }) => {
    // Synchronous: an async hook would cost every request a promise for nothing.
    app.addHook('onResponse', (request, reply, done) => {
      metrics.httpRequestDuration.observe(
        { method: request.method, route: request.routeOptions.url ?? 'unmatched', status_code: reply.statusCode },
        reply.elapsedTime / 1000,
      );
      done();
    });
    app.get('/metrics', { schema: { hide: true } }, async (request, reply) => {
      if (beforeScrape) await beforeScrape().catch((err) => request.log.warn({ err }, 'metrics scrape hook failed'));
      return reply.type(metrics.registry.contentType).send(await metrics.registry.metrics());
    });
  },
  { name: 'metrics' },
);
