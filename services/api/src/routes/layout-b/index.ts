import formbody from '@fastify/formbody';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { createAuthHook, LAYOUT_B_UNAUTHORIZED } from '../../plugins/auth';
import { registerIdempotency } from '../../plugins/idempotency';
import { createRateLimitGuard } from '../../plugins/rate-limit';
import { postsRouteTest } from '../../plugins/route-rules';
import type { Layout } from '../api-routes';
import { postsRoutesB } from './posts-routes';

const NOT_IMPLEMENTED = { error: 'Endpoint not implemented.' };

/**
 * Layout B (docs/design.md §5): errors `{"message":"..."}`, auth without quota on every mounted
 * route, JSON or urlencoded bodies, and 501 for any unknown endpoint under /api/v1 (after
 * auth when it lies under /api/v1/posts, as the spec's middleware runs first).
 */
export const layoutB: Layout = {
  errorBody: (_status, message) => ({ message }),
  postsRoutes: postsRoutesB,
  plugin: async (app, { routes, config, posts, postReader, images, credentials }) => {
    await app.register(formbody);
    const isPostsRoute = postsRouteTest(app.prefix);
    // Service keys act for no user: the posts routes refuse them like any unknown credential (docs/design.md §4).
    const rateLimit = createRateLimitGuard(app, { perMinute: config.rateLimitPerMin, prefix: config.redisPrefix, errorBody: layoutB.errorBody });
    const authenticate = createAuthHook({
      store: credentials,
      unauthorizedBody: LAYOUT_B_UNAUTHORIZED,
      serviceKeysAllowed: (request) => !isPostsRoute(request),
      rateLimit,
    });

    app.setNotFoundHandler(
      {
        preHandler: async (request: FastifyRequest, reply: FastifyReply) => {
          if (isPostsRoute(request)) return authenticate(request, reply);
          return rateLimit?.(request, reply);
        },
      },
      async (_request, reply) => reply.code(501).send(NOT_IMPLEMENTED),
    );

    await app.register(async (authenticated) => {
      authenticated.addHook('onRequest', authenticate);
      // Before the routes: it marks those registered with `config: { idempotency: true }`.
      registerIdempotency(authenticated, { sequelize: app.db.sequelize, log: app.log, leaseMs: config.idempotencyLeaseMs });
      for (const plugin of routes) await authenticated.register(plugin, { config, posts, postReader, images });
    });
  },
};
