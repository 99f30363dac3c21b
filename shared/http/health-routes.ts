import type {} from '@fastify/swagger';
import type { FastifyPluginAsync } from 'fastify';

/** A named readiness probe; it rejects or throws when the dependency is not usable. */
export type ReadinessCheck = () => Promise<unknown>;

/** Facts `/ready` adds to its body beside the checks, such as `redis_primary`; undefined ones are left out. */
export type ReadinessFacts = () => Record<string, string | undefined>;

/**
 * `GET /health`: 200 `{"status":"ok"}` while the process runs.
 * `GET /ready`: 200 `{"status":"ready","checks":{name:"up"}}` when every check passes within
 * 2 s, else 503 with `"unavailable"` and `"down"` against the failing checks; `facts` adds its
 * keys (with Redis Sentinel: `"redis_primary":"host:port"`, docs/design.md §13.2).
 */
export const healthRoutes: FastifyPluginAsync<{ checks: Record<string, ReadinessCheck>; facts?: ReadinessFacts }> = async (app, { checks, facts }) => {
  app.get(
    '/health',
    { schema: { tags: ['health'], summary: 'Liveness', operationId: 'getHealth', description: 'Answers 200 while the process runs; it checks no dependency.' } },
    async () => ({ status: 'ok' }),
  );
  const readiness = 'Answers 200 when each check (PostgreSQL, and Redis where the process uses it) answers within 2 s, else 503 naming those that are down.';
  app.get('/ready', { schema: { tags: ['health'], summary: 'Readiness: database and Redis reachable', operationId: 'getReady', description: readiness } }, async (request, reply) => {
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
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'unavailable', checks: Object.fromEntries(results), ...facts?.() });
  });
};

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
