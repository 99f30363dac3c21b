/** One long-running process that `npm start` runs (docs/design.md §1, §9). */
export interface ServiceDefinition {
  /** Log prefix, and the service's name in docker-compose.yml. */
  name: string;
  /** Run from the project root after `npm run build`. */
  command: string;
  /** Added to the inherited environment (DATABASE_URL, REDIS_URL, ... pass through). */
  env: Record<string, string>;
  /** The port it listens on (health, readiness, metrics). */
  port: number;
  /** Run as several copies (`docker compose up --scale`), so compose publishes no port for it. */
  scalable: boolean;
}

/**
 * The V8 heap settings of the api and the worker, the two services under load (node options,
 * so their `npm run start:*` scripts, `npm start`, compose and the benchmark all pass them).
 * Neither grows with the requests or deliveries it has served (the worker holds about
 * 30 MB); but under load the request objects of concurrent requests and attempts often
 * outlive two young-generation collections, so several KB per request die in the old
 * generation. With V8's defaults that generation grows to about four times the live size
 * before a full collection, and the young one takes 2 x 16 MB: the worker's RSS neared
 * 250 MB at full delivery rate, the api's 240 MB under 500 creates/s. A heap limit under
 * 2 GB lowers V8's growing factor to about 1.4 (512 MB is still 17 times what the worker
 * holds), and 8 MB semi-spaces halve the young generation and make each scavenge cheaper
 * (fewer survivors), so no throughput is lost (bench/RESULTS.md).
 */
export const NODE_HEAP_FLAGS = ['--max-old-space-size=512', '--max-semi-space-size=8'] as const;

const API_COMMAND = `node ${NODE_HEAP_FLAGS.join(' ')} dist/services/api/src/server.js`;

/**
 * Every service of the system, in start order. docker-compose.yml runs the same commands
 * with the same variables (a test keeps the two in step).
 */
export const SERVICES: readonly ServiceDefinition[] = [
  { name: 'api-a', command: API_COMMAND, env: { API_LAYOUT: 'a', PORT: '3000' }, port: 3000, scalable: false },
  { name: 'api-b', command: API_COMMAND, env: { API_LAYOUT: 'b', PORT: '3001' }, port: 3001, scalable: false },
  { name: 'receiver', command: 'node dist/services/receiver/src/server.js', env: { PORT: '3002' }, port: 3002, scalable: false },
  {
    name: 'webhook-worker',
    command: `node ${NODE_HEAP_FLAGS.join(' ')} dist/services/webhook-worker/src/main.js`,
    env: { WORKER_METRICS_PORT: '3003' },
    port: 3003,
    scalable: true,
  },
];
