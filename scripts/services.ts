/** One long-running process that `npm start` runs (DESIGN §1, §9). */
export interface ServiceDefinition {
  /** Log prefix, and the service's name in docker-compose.yml. */
  name: string;
  /** Run from the project root after `npm run build`. */
  command: string;
  /** Added to the inherited environment (DATABASE_URL, REDIS_URL, ... pass through). */
  env: Record<string, string>;
  /** The port it listens on, or null for a process without one. */
  port: number | null;
}

/**
 * Every service of the system, in start order. Later issues append the receiver (3002)
 * and the webhook worker here; docker-compose.yml mirrors this list.
 */
export const SERVICES: readonly ServiceDefinition[] = [
  { name: 'api-a', command: 'node dist/services/api/src/server.js', env: { API_LAYOUT: 'a', PORT: '3000' }, port: 3000 },
  { name: 'api-b', command: 'node dist/services/api/src/server.js', env: { API_LAYOUT: 'b', PORT: '3001' }, port: 3001 },
];
