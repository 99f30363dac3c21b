import fastifyStatic from '@fastify/static';
import Fastify, { FastifyInstance } from 'fastify';
import { publishCredentialChange } from '../../../shared/auth/credential-changes';
import type { Config } from '../../../shared/config';
import { createDatabase, Database } from '../../../shared/db';
import { DayPartitionKeeper, startDayPartitionKeeper } from '../../../shared/db/partition-keeper';
import { databasePlugin } from '../../../shared/http/database-plugin';
import { loggerOptions } from '../../../shared/logging';
import { healthRoutes } from '../../../shared/http/health-routes';
import { redisPlugin } from '../../../shared/http/redis-plugin';
import { serverTimeouts } from '../../../shared/http/server-timeouts';
import { createMetrics, Metrics, metricsPlugin } from '../../../shared/metrics';
import { endpointRulesOf } from '../../../shared/operations/endpoints';
import { createWebhookQueue, QueueUnavailableError, WebhookQueue } from '../../../shared/queue';
import { createOutbox } from '../../../shared/deliveries/outbox';
import { CircuitState, readCircuitState } from '../../../shared/endpoint-gate';
import { createRedis, describeRedisTarget, logRedisOutages, pingRedis, RedisClient, redisPrimaryOf } from '../../../shared/redis';
import { requestTracing } from '../../../shared/tracing/request-tracing';
import { createImageStore } from '../../../shared/posts/images/image-store';
import { createPostCache } from '../../../shared/posts/post-cache';
import { type PostOutbox, postOutboxOf } from '../../../shared/posts/post-events';
import { createPostsRepository } from '../../../shared/posts/posts-repository';
import { createErrorHandler } from './error-handler';
import { requestIdOf } from './request-id';
import { adminQueuesPlugin } from './plugins/admin-queues';
import { createCachedCredentialStore } from './plugins/credential-cache';
import { createCredentialStore } from './plugins/credential-store';
import { postIdempotencyClaims } from './plugins/idempotency-store';
import { dashboardPlugin } from './plugins/dashboard';
import { listReaderPlugin } from './plugins/list-reader';
import { portalPagePlugin } from './plugins/portal-page';
import { swaggerPlugin } from './plugins/swagger';
import { createCachedPostReader } from './posts/cached-post-reader';
import { collectQueueMetrics } from './queue-metrics';
import type { ApiRoutes, Layout } from './routes/api-routes';
import { layoutA } from './routes/layout-a';
import { layoutB } from './routes/layout-b';
import { operationsRoutes } from './routes/operations';
import { portalRoutes } from './routes/portal';

/** Collaborators buildApp would otherwise create from the config; the app closes them when it closes. */
export interface AppDeps {
  /** Records post events in the post's transaction; default: the outbox over `queue`. */
  postEvents?: PostOutbox;
  database?: Database;
  redis?: RedisClient;
  /** The producer side of the `webhooks` queue; default: one over `redis`. */
  queue?: WebhookQueue;
  metrics?: Metrics;
  /**
   * Extra route plugins mounted under /api/v1 in BOTH layouts, after the posts routes.
   * Each runs behind the layout's auth hook (Layout A: with quota), so `request.user` is
   * set, and under the layout's error handler (throw `ApiError` for a 4xx in its shape).
   * A plugin with its own options is wrapped, e.g.
   * `async (scope) => { await scope.register(webhookRoutes, { db: scope.db, queue }); }`.
   */
  apiRoutes?: ApiRoutes[];
}

const LAYOUTS: Record<Config['apiLayout'], Layout> = { a: layoutA, b: layoutB };

const JSON_BODY_LIMIT_BYTES = 1024 * 1024;

/**
 * Builds the api (docs/design.md §1, §4, §5, §6.1) for `config.apiLayout`; never listens.
 * Routes: /health, /ready, /metrics, /docs, /docs/json, /dashboard, /portal, the layout at /api/v1 with the
 * operations routes (docs/design.md §11.4), in Layout A /cdn/, and /admin/queues when ADMIN_USER and ADMIN_PASSWORD
 * are set. The outbox relay runs from `ready()` (or `listen()`) until `close()`.
 */
export function buildApp(config: Config, deps: AppDeps = {}): FastifyInstance {
  const app = Fastify({
    logger: loggerOptions(config),
    // The id goes into every log line: a client's own is kept only when short and plain (docs/design.md §12).
    requestIdHeader: false,
    genReqId: requestIdOf,
    bodyLimit: JSON_BODY_LIMIT_BYTES,
    routerOptions: { ignoreTrailingSlash: true },
    // A slow client (a body trickled in, headers never finished) must not hold a connection for ever.
    ...serverTimeouts(config.requestTimeoutMs),
  });
  const database = deps.database ?? createDatabase(config.databaseUrl);
  const redis = deps.redis ?? createRedis(config, 'client', { commandTimeout: 1_000 });
  logRedisOutages(redis, app.log, `Redis at ${describeRedisTarget(config)}`, 'the cache is off, deliveries wait in the outbox');
  const queue = deps.queue ?? createWebhookQueue(config, redis, app.log);
  const outbox = createOutbox({ db: database, queue, logger: app.log, relayIntervalMs: config.outboxRelayIntervalMs });
  const postEvents = deps.postEvents ?? postOutboxOf(database.sequelize, outbox);
  const metrics = deps.metrics ?? createMetrics(`api-${config.apiLayout}`);
  const layout = LAYOUTS[config.apiLayout];

  // The API speaks JSON (and forms per layout); a text/plain body is a wrong content type, not a string body.
  app.removeContentTypeParser('text/plain');
  // Many clients send `Content-Type: application/json` with no body (DELETE above all): that is
  // no body, not malformed JSON. Anything else goes to Fastify's parser and its poisoning checks.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (body === '') return done(null, undefined);
    // Fastify's own JSON parser is synchronous: it answers through done, never a promise.
    void parseJson(request, body as string, done);
  });
  app.decorateRequest('user', null);
  app.decorateRequest('principal', null);
  app.register(requestTracing);
  // Echo the id so a client can quote it; it is in every log line of the request.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    done();
  });
  app.setErrorHandler(createErrorHandler(layout.errorBody));
  app.setNotFoundHandler((_request, reply) => reply.code(404).send(layout.errorBody(404, 'Not found.')));
  app.register(databasePlugin, { database });
  app.register(redisPlugin, { redis });
  app.register(listReaderPlugin, { config, primary: database, metrics });
  let keeper: DayPartitionKeeper | undefined;
  app.addHook('onReady', async () => {
    outbox.startRelay();
    // docs/design.md §3.5: every process keeps the day partitions ahead, at start and every
    // MAINTENANCE_INTERVAL_MS. A database that is away does not stop the api: the next check retries.
    keeper = startDayPartitionKeeper({ sequelize: database.sequelize, logger: app.log, intervalMs: config.maintenanceIntervalMs });
    await keeper.check();
  });
  // Before the Redis connection it uses is closed by the redis plugin's own hook, and the database by its own.
  app.addHook('preClose', async () => {
    await keeper?.close();
    await outbox.stop();
    await queue.close();
  });
  app.register(metricsPlugin, {
    metrics,
    beforeScrape: () => {
      const primary = redisPrimaryOf(redis);
      metrics.redisPrimary.reset();
      if (primary) metrics.redisPrimary.set({ address: primary }, 1);
      return collectQueueMetrics(metrics, queue, database);
    },
  });
  if (config.adminUser && config.adminPassword) {
    app.register(adminQueuesPlugin, { queue, user: config.adminUser, password: config.adminPassword });
  }
  app.register(swaggerPlugin, { layout: config.apiLayout, appUrl: config.appUrl });
  app.register(healthRoutes, { checks: { database: () => database.ping(), redis: () => pingRedis(redis) }, facts: () => ({ redis_primary: redisPrimaryOf(redis) }) });
  app.register(dashboardPlugin);
  app.register(portalPagePlugin, { frameAncestors: config.portalFrameAncestors });

  const images = createImageStore(config.uploadDir);
  const cache = createPostCache(redis, { prefix: config.redisPrefix, log: app.log });
  const posts = createPostsRepository({
    sequelize: database.sequelize,
    events: postEvents,
    cache,
    claims: postIdempotencyClaims,
    removeImage: images.remove,
    log: app.log,
  });
  const postReader = config.apiLayout === 'a' ? createCachedPostReader(posts, cache) : posts;

  if (config.apiLayout === 'a') {
    app.register(fastifyStatic, {
      root: images.directory,
      prefix: '/cdn/',
      decorateReply: false,
      index: false,
      setHeaders: (res) => {
        res.setHeader('X-Content-Type-Options', 'nosniff');
      },
    });
  }
  // Its own connection: a subscriber can send nothing else. Closed by the store.
  const credentials = createCachedCredentialStore(createCredentialStore(database.sequelize, { log: app.log }), {
    subscriber: createRedis(config, 'client', { commandTimeout: 1_000 }),
    prefix: config.redisPrefix,
    log: app.log,
  });
  app.addHook('onClose', () => credentials.close());
  app.register(layout.plugin, {
    prefix: '/api/v1',
    config,
    credentials,
    posts,
    postReader,
    images,
    routes: [
      layout.postsRoutes,
      async (scope) => {
        await scope.register(operationsRoutes, {
          db: database,
          lists: scope.listReader,
          queue,
          readCircuit: (endpointId) => readCircuit(redis, config, endpointId),
          retentionDays: config.webhookRetentionDays,
          endpointRules: endpointRulesOf(config),
        });
        await scope.register(portalRoutes, {
          sequelize: database.sequelize,
          appUrl: config.appUrl,
          announce: (change) => {
            credentials.forget(change);
            return publishCredentialChange(redis, config.redisPrefix, change);
          },
        });
      },
      ...(deps.apiRoutes ?? []),
    ],
  });
  return app;
}

/** An endpoint's circuit state for its stats; Redis away is a 503, as for the queue. */
async function readCircuit(redis: RedisClient, config: Config, endpointId: number): Promise<CircuitState> {
  try {
    return await readCircuitState(redis, config.redisPrefix, endpointId, config.webhookQueuePartitions);
  } catch (error) {
    throw new QueueUnavailableError('Could not read the circuit state.', { cause: error });
  }
}
