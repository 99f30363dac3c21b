import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import fp from 'fastify-plugin';

/**
 * OpenAPI 3 document at /docs/json and Swagger UI at /docs, built from the route schemas.
 * Register before any route so every route is collected.
 */
export const swaggerPlugin = fp<{ layout: 'a' | 'b'; appUrl: string }>(
  async (app, { layout, appUrl }) => {
    await app.register(swagger, {
      openapi: {
        openapi: '3.0.3',
        info: {
          title: `Posts API (Layout ${layout.toUpperCase()})`,
          version: '1',
          description:
            'Posts REST API and the webhook operations API (docs/design.md §11). Users authenticate with their bearer token and the ' +
            'user_id (or X-Api-Client-Id) header; other services and operators with a service key (`sk_...`) as the bearer ' +
            'token and no user id. Each operations route names the scope a key needs; users see only their own endpoints ' +
            'and the deliveries to them.',
          contact: { name: 'The operators of this api' },
        },
        servers: [{ url: appUrl, description: 'This api (APP_URL)' }],
        tags: [
          { name: 'health', description: 'Liveness and readiness for load balancers and orchestrators' },
          { name: `posts (layout ${layout})`, description: `The posts REST API in Layout ${layout.toUpperCase()}'s routes and shapes` },
          { name: 'endpoints', description: 'Webhook endpoints: create, change, rotate, test, recover, health' },
          { name: 'webhooks', description: 'Deliveries: send, fan out events, list, inspect, redeliver' },
          { name: 'event types', description: 'The catalog of events endpoints subscribe to' },
          { name: 'portal', description: 'One-time links into the dashboard for one user, and the sessions they open' },
        ],
        components: {
          securitySchemes: {
            bearerToken: {
              type: 'http',
              scheme: 'bearer',
              description:
                "A user's API token (with the user id header), a service key `sk_...` (alone), or a portal session `ps_...` (alone; its user's endpoints and deliveries only).",
            },
            userIdHeader: { type: 'apiKey', in: 'header', name: 'user_id', description: 'Or X-Api-Client-Id behind proxies that drop underscores' },
          },
        },
      },
    });
    // Keeps the key entered under "Authorize" across reloads, so a reader can try route after route.
    await app.register(swaggerUi, { routePrefix: '/docs', uiConfig: { persistAuthorization: true } });
  },
  { name: 'swagger' },
);
