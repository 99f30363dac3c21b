import { randomUUID } from 'node:crypto';
import fastifyStatic from '@fastify/static';
import Fastify, { FastifyInstance } from 'fastify';
import type Redis from 'ioredis';
import type { Config } from '../../../shared/config';
import { createDatabase, Database } from '../../../shared/db';
import { databasePlugin } from '../../../shared/http/database-plugin';
import { healthRoutes } from '../../../shared/http/health-routes';
import { redisPlugin } from '../../../shared/http/redis-plugin';
import { createRedis } from '../../../shared/redis';
import { createErrorHandler } from './error-handler';
import { createImageStore } from './images/image-store';
import { swaggerPlugin } from './plugins/swagger';
import { createCachedPostReader } from './posts/cached-post-reader';
import { createPostCache } from './posts/post-cache';
import { createDiscardingPostEventRecorder, PostEventRecorder } from './posts/post-events';
import { createPostsRepository } from './posts/posts-repository';
import type { ApiRoutes, Layout } from './routes/api-routes';
import { layoutA } from './routes/layout-a';
import { layoutB } from './routes/layout-b';

/** Collaborators buildApp would otherwise create from the config; the app closes them when it closes. */
export interface AppDeps {
  /** Records post events in the post's transaction (the outbox); default: a recorder that discards them. */
  postEvents?: PostEventRecorder;
  database?: Database;
  redis?: Redis;
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

// Cached Layout A reads expire after this even if an invalidation was lost to a Redis outage, seconds.
const CACHE_TTL_SECONDS = 300;
const JSON_BODY_LIMIT_BYTES = 1024 * 1024;

/**
 * Builds the api (DESIGN §1, §4, §5) for `config.apiLayout`; never listens.
 * Routes: /health, /ready, /docs, /docs/json, the layout at /api/v1 and, in Layout A, /cdn/.
 */
export function buildApp(config: Config, deps: AppDeps = {}): FastifyInstance {
  const app = Fastify({
    logger: { level: config.logLevel },
    requestIdHeader: 'x-request-id',
    genReqId: () => randomUUID(),
    bodyLimit: JSON_BODY_LIMIT_BYTES,
    routerOptions: { ignoreTrailingSlash: true },
  });
  const database = deps.database ?? createDatabase(config.databaseUrl);
  const redis = deps.redis ?? createRedis(config.redisUrl, 'client', { commandTimeout: 1_000 });
  logRedisOutages(redis, app);
  const postEvents = deps.postEvents ?? discardingWithWarning(app);
  const layout = LAYOUTS[config.apiLayout];

  // The API speaks JSON (and forms per layout); a text/plain body is a wrong content type, not a string body.
  app.removeContentTypeParser('text/plain');
  app.decorateRequest('user', null);
  // Echo the id so a client can quote it; it is in every log line of the request.
  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });
  app.setErrorHandler(createErrorHandler(layout.errorBody));
  app.setNotFoundHandler((_request, reply) => reply.code(404).send(layout.errorBody(404, 'Not found.')));
  app.register(databasePlugin, { database });
  app.register(redisPlugin, { redis });
  app.register(swaggerPlugin, { layout: config.apiLayout });
  app.register(healthRoutes, { checks: { database: () => database.ping(), redis: () => redis.ping() } });

  const images = createImageStore(config.uploadDir);
  const cache = createPostCache(redis, { prefix: config.redisPrefix, ttlSeconds: CACHE_TTL_SECONDS, log: app.log });
  const posts = createPostsRepository({ sequelize: database.sequelize, events: postEvents, cache, removeImage: images.remove, log: app.log });
  const postReader = config.apiLayout === 'a' ? createCachedPostReader(posts, cache) : posts;

  if (config.apiLayout === 'a') {
    app.register(fastifyStatic, {
      root: images.directory,
      prefix: '/cdn/',
      decorateReply: false,
      index: false,
      setHeaders: (res) => res.setHeader('X-Content-Type-Options', 'nosniff'),
    });
  }
  app.register(layout.plugin, {
    prefix: '/api/v1',
    config,
    posts,
    postReader,
    images,
    routes: [layout.postsRoutes, ...(deps.apiRoutes ?? [])],
  });
  return app;
}

/** ioredis reports every failed reconnect; log the transitions only. */
function logRedisOutages(redis: Redis, app: FastifyInstance): void {
  let up = true;
  redis.on('error', (err) => {
    if (up) app.log.warn({ err }, 'Redis unreachable: serving Layout A reads from the database');
    up = false;
  });
  redis.on('ready', () => {
    if (!up) app.log.info('Redis reachable again');
    up = true;
  });
}

function discardingWithWarning(app: FastifyInstance): PostEventRecorder {
  app.log.warn('no post event recorder given: post events are discarded and no webhook is sent for post changes');
  return createDiscardingPostEventRecorder();
}
