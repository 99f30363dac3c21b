import Fastify, { type FastifyInstance } from 'fastify';
import type { Config } from '../../../shared/config';
import { type Database, createDatabase } from '../../../shared/db';
import { databasePlugin } from '../../../shared/http/database-plugin';
import { healthRoutes } from '../../../shared/http/health-routes';
import { type Metrics, createMetrics, metricsPlugin } from '../../../shared/metrics';
import { webhookRoutes } from './routes/webhooks';

/** What a caller may hand in instead of letting the app create it. */
export interface ReceiverDeps {
  /** An open database; default: one created from `config.databaseUrl`, closed with the app. */
  database?: Database;
  metrics?: Metrics;
}

/**
 * Builds the receiver (DESIGN §1, §8) and never listens: `POST /webhooks/users`,
 * `POST /webhooks/posts`, `GET /health`, `GET /ready` (database reachable), `GET /metrics`.
 * `app.close()` closes the database.
 */
export async function buildApp(config: Config, deps: ReceiverDeps = {}): Promise<FastifyInstance> {
  const app = Fastify({ logger: { level: config.logLevel }, bodyLimit: 1024 * 1024 });
  await app.register(databasePlugin, { database: deps.database ?? createDatabase(config.databaseUrl) });
  await app.register(metricsPlugin, { metrics: deps.metrics ?? createMetrics('receiver') });
  await app.register(healthRoutes, { checks: { database: () => app.db.ping() } });
  await app.register(webhookRoutes, { prefix: '/webhooks', secrets: config.receiverSecrets, toleranceS: config.receiverToleranceS });
  return app;
}
