/** One long-running process that `npm start` runs (DESIGN §1, §9). */
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
 * Every service of the system, in start order. docker-compose.yml runs the same commands
 * with the same variables (a test keeps the two in step).
 */
export const SERVICES: readonly ServiceDefinition[] = [
  { name: 'api-a', command: 'node dist/services/api/src/server.js', env: { API_LAYOUT: 'a', PORT: '3000' }, port: 3000, scalable: false },
  { name: 'api-b', command: 'node dist/services/api/src/server.js', env: { API_LAYOUT: 'b', PORT: '3001' }, port: 3001, scalable: false },
  { name: 'receiver', command: 'node dist/services/receiver/src/server.js', env: { PORT: '3002' }, port: 3002, scalable: false },
  {
    name: 'webhook-worker',
    command: 'node dist/services/webhook-worker/src/main.js',
    env: { WORKER_METRICS_PORT: '3003' },
    port: 3003,
    scalable: true,
  },
];
