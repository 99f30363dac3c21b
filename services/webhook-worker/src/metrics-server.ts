import Fastify, { FastifyInstance } from 'fastify';
import type { Database } from '../../../shared/db';
import { healthRoutes } from '../../../shared/http/health-routes';
import { Metrics, metricsPlugin } from '../../../shared/metrics';
import type { WebhookWorker } from './worker';

/**
 * The worker's small HTTP side, built but not listening: `/health` (the process runs),
 * `/ready` (database answers and the worker's Redis connections are ready) and `/metrics`
 * (Prometheus text format).
 */
export function createMetricsServer(deps: { db: Database; worker: WebhookWorker; metrics: Metrics }): FastifyInstance {
  const app = Fastify({ logger: false });
  app.register(healthRoutes, {
    checks: {
      database: () => deps.db.ping(),
      redis: async () => {
        if (!deps.worker.isReady()) throw new Error('worker Redis connection is not ready');
      },
    },
    facts: () => ({ redis_primary: deps.worker.redisPrimary() }),
  });
  app.register(metricsPlugin, { metrics: deps.metrics, beforeScrape: () => deps.worker.refreshMetrics() });
  return app;
}
