import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import fp from 'fastify-plugin';

/**
 * OpenAPI 3 document at /docs/json and Swagger UI at /docs, built from the route schemas.
 * Register before any route so every route is collected.
 */
export const swaggerPlugin = fp<{ layout: 'a' | 'b' }>(
  async (app, { layout }) => {
    await app.register(swagger, {
      openapi: {
        openapi: '3.0.3',
        info: {
          title: `Posts API (Layout ${layout.toUpperCase()})`,
          version: '1',
          description: 'Posts REST API; authenticate with a bearer token and the user_id (or X-Api-Client-Id) header.',
        },
        components: {
          securitySchemes: {
            bearerToken: { type: 'http', scheme: 'bearer' },
            userIdHeader: { type: 'apiKey', in: 'header', name: 'user_id', description: 'Or X-Api-Client-Id behind proxies that drop underscores' },
          },
        },
      },
    });
    await app.register(swaggerUi, { routePrefix: '/docs' });
  },
  { name: 'swagger' },
);
