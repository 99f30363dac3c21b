import type {} from '@fastify/swagger';
import type { FastifyPluginAsync } from 'fastify';

/** A named readiness probe; it rejects or throws when the dependency is not usable. */
export type ReadinessCheck = () => Promise<unknown>;

/**
 * `GET /health`: 200 `{"status":"ok"}` while the process runs.
 * `GET /ready`: 200 `{"status":"ready","checks":{name:"up"}}` when every check passes within
 * 2 s, else 503 with `"unavailable"` and `"down"` against the failing checks.
 */
export const healthRoutes: FastifyPluginAsync<{ checks: Record<string, ReadinessCheck> }> = async (app, { checks }) => {
  app.get('/health', { schema: { tags: ['health'], summary: 'Liveness' } }, async () => ({ status: 'ok' }));
  app.get('/ready', { schema: { tags: ['health'], summary: 'Readiness: database and Redis reachable' } }, async (request, reply) => {
    const results = await Promise.all(
      Object.entries(checks).map(async ([name, check]) => {
        try {
          await withTimeout(check(), 2_000);
          return [name, 'up'] as const;
        } catch (error) {
          request.log.warn({ check: name, err: error }, 'readiness check failed');
          return [name, 'down'] as const;
        }
      }),
    );
    const ready = results.every(([, state]) => state === 'up');
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'unavailable', checks: Object.fromEntries(results) });
  });
};

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
