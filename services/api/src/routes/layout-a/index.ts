import multipart from '@fastify/multipart';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { chainGuards, createAuthHook, LAYOUT_A_UNAUTHORIZED } from '../../plugins/auth';
import { createQuotaHook } from '../../plugins/quota';
import { registerIdempotency } from '../../plugins/idempotency';
import { createRateLimitGuard } from '../../plugins/rate-limit';
import { postsRouteTest } from '../../plugins/route-rules';
import type { Layout } from '../api-routes';
import { postsRoutesA } from './posts-routes';

const MEGABYTE = 1024 * 1024;
const INVALID_ENDPOINT = { status: 401, message: 'Invalid or missing endpoint.' };

/**
 * Layout A (Luminova's shapes, docs/design.md §5): errors `{"status":N,"message":"..."}`, auth with
 * quota on every mounted route, multipart uploads, and 401 for any unknown endpoint under
 * /api/v1 (after auth and quota when it lies under /api/v1/posts, as the spec's middleware runs first).
 */
export const layoutA: Layout = {
  errorBody: (status, message) => ({ status, message }),
  postsRoutes: postsRoutesA,
  plugin: async (app, { routes, config, posts, postReader, images, credentials }) => {
    await app.register(multipart, { limits: { fileSize: 2 * MEGABYTE, files: 1, fields: 10, fieldSize: MEGABYTE, parts: 11 } });
    const isPostsRoute = postsRouteTest(app.prefix);
    // Service keys act for no user: the posts routes refuse them like any unknown credential (docs/design.md §4).
    const rateLimit = createRateLimitGuard(app, { perMinute: config.rateLimitPerMin, prefix: config.redisPrefix, errorBody: layoutA.errorBody });
    const authenticate = chainGuards(
      createAuthHook({
        store: credentials,
        unauthorizedBody: LAYOUT_A_UNAUTHORIZED,
        serviceKeysAllowed: (request) => !isPostsRoute(request),
        rateLimit,
      }),
      createQuotaHook(app.db.sequelize, config.quotaPeriodS),
    );

    app.setNotFoundHandler(
      {
        preHandler: async (request: FastifyRequest, reply: FastifyReply) => {
          if (isPostsRoute(request)) return authenticate(request, reply);
          return rateLimit?.(request, reply);
        },
      },
      async (_request, reply) => reply.code(401).send(INVALID_ENDPOINT),
    );

    await app.register(async (authenticated) => {
      authenticated.addHook('onRequest', authenticate);
      // Before the routes: it marks those registered with `config: { idempotency: true }`.
      registerIdempotency(authenticated, { sequelize: app.db.sequelize, log: app.log, leaseMs: config.idempotencyLeaseMs });
      for (const plugin of routes) await authenticated.register(plugin, { config, posts, postReader, images });
    });
  },
};
