import Fastify, { type FastifyInstance } from 'fastify';
import { publishCredentialChange } from '../../../shared/auth/credential-changes';
import type { Config } from '../../../shared/config';
import { type Database, createDatabase } from '../../../shared/db';
import { databasePlugin } from '../../../shared/http/database-plugin';
import { healthRoutes } from '../../../shared/http/health-routes';
import { redisPlugin } from '../../../shared/http/redis-plugin';
import { serverTimeouts } from '../../../shared/http/server-timeouts';
import { type Metrics, createMetrics, metricsPlugin } from '../../../shared/metrics';
import { type RedisClient, createRedis, describeRedisTarget, logRedisOutages } from '../../../shared/redis';
import { createImageStore } from '../../../shared/posts/images/image-store';
import { createPostCache } from '../../../shared/posts/post-cache';
import { createPostDeletions } from '../../../shared/posts/post-deletions';
import { relayedPostEvents } from '../../../shared/posts/post-events';
import { webhookRoutes } from './routes/webhooks';
import { loggerOptions } from '../../../shared/logging';

/** What a caller may hand in instead of letting the app create it; the app closes what it is given. */
export interface ReceiverDeps {
  /** An open database; default: one created from `config.databaseUrl`. */
  database?: Database;
  /** The Redis holding Layout A's cache; default: one from the config (REDIS_URL or REDIS_CLUSTER_NODES). */
  redis?: RedisClient;
  metrics?: Metrics;
}

/**
 * Builds the receiver (docs/design.md §1, §8) and never listens: `POST /webhooks/users`,
 * `POST /webhooks/posts`, `GET /health`, `GET /ready` (database reachable), `GET /metrics`.
 * A user's posts are deleted through the posts module (shared/posts), so Layout A's cache in Redis
 * (REDIS_URL, REDIS_PREFIX) is invalidated and their images leave UPLOAD_DIR. Redis being
 * away degrades to a logged, TTL-bounded stale cache, never a failed webhook.
 * `app.close()` closes the database and the Redis connection.
 *
 * @throws UploadDirectoryError when UPLOAD_DIR cannot be created or written
 */
export async function buildApp(config: Config, deps: ReceiverDeps = {}): Promise<FastifyInstance> {
  // First: it may throw, and nothing is open yet.
  const images = createImageStore(config.uploadDir);
  const app = Fastify({ logger: loggerOptions(config), bodyLimit: 1024 * 1024, ...serverTimeouts(config.requestTimeoutMs) });
  const database = deps.database ?? createDatabase(config.databaseUrl);
  const redis = deps.redis ?? createRedis(config, 'client', { commandTimeout: 1_000 });
  logRedisOutages(redis, app.log, `Redis at ${describeRedisTarget(config)}`);
  await app.register(databasePlugin, { database });
  await app.register(redisPlugin, { redis });
  await app.register(metricsPlugin, { metrics: deps.metrics ?? createMetrics('receiver') });
  await app.register(healthRoutes, { checks: { database: () => app.db.ping() } });

  const posts = createPostDeletions({
    sequelize: database.sequelize,
    // No queue here: the rows wait for the api's outbox relay (docs/design.md §6.1).
    events: relayedPostEvents(database.sequelize),
    cache: createPostCache(redis, { prefix: config.redisPrefix, log: app.log }),
    removeImage: images.remove,
    log: app.log,
  });
  await app.register(webhookRoutes, {
    prefix: '/webhooks',
    secrets: config.receiverSecrets,
    toleranceS: config.receiverToleranceS,
    acceptXSignatureOnly: config.receiverAcceptXSignatureOnly,
    users: {
      posts,
      // Every api process drops its cached copy of the user (docs/design.md §4, "Revocation").
      credentialsChanged: async (userId) => void (await publishCredentialChange(redis, config.redisPrefix, { kind: 'user', userId })),
    },
  });
  return app;
}
