import { existsSync } from 'node:fs';

/** Where the test run's PostgreSQL and Redis live, decided once by the global setup. */
export interface TestServices {
  /** A URL to the server's maintenance database, used to create and drop test databases. */
  adminDatabaseUrl: string;
  redisUrl: string;
  /** Unique to this run; every database and Redis prefix of the run starts with it. */
  runId: string;
  /** The migrated database every test file clones. */
  templateDatabase: string;
}

const ENV_KEY = 'POSTS_WEBHOOKS_TEST_SERVICES';

export function publishServices(services: TestServices): void {
  process.env[ENV_KEY] = JSON.stringify(services);
}

/** The services chosen by the global setup; jest workers inherit them through the environment. */
export function testServices(): TestServices {
  const raw = process.env[ENV_KEY];
  if (!raw) throw new Error('test services are not set: run the tests through jest (globalSetup)');
  return JSON.parse(raw) as TestServices;
}

/** True when a Docker engine socket is configured, so testcontainers has a chance to answer. */
export function dockerMayAnswer(): boolean {
  return Boolean(process.env.DOCKER_HOST) || existsSync('/var/run/docker.sock');
}

/** The URL with its database replaced, e.g. to point at `postgres` or a test database. */
export function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = '/' + encodeURIComponent(database);
  return parsed.toString();
}
