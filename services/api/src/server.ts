import closeWithGrace from 'close-with-grace';
import { ConfigError, loadConfig } from '../../../shared/config';
import { createDatabase } from '../../../shared/db';
import { failIfPortUnusable, failStart } from '../../../shared/logging';
import { createRedis, whenReady } from '../../../shared/redis';
import { startTracing } from '../../../shared/tracing';
import { buildApp } from './app';
import { UploadDirectoryError } from '../../../shared/posts/images/errors';

/** The URL with its password masked, for messages. */
function redact(url: string): string {
  const parsed = new URL(url);
  if (parsed.password) parsed.password = '***';
  return parsed.toString();
}

/** A start-up failure a user can act on: one line on stderr, no stack trace, exit 1. */
function fail(message: string): never {
  failStart('api', message);
}

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig(process.env, 'api');
  } catch (err) {
    if (err instanceof ConfigError) fail(err.message);
    throw err;
  }

  const database = createDatabase(config.databaseUrl);
  try {
    await database.ping();
  } catch (err) {
    await database.close().catch(() => undefined);
    fail(`cannot reach PostgreSQL at ${redact(config.databaseUrl)} (DATABASE_URL): ${(err as Error).message}`);
  }
  const tracing = await startTracing({ serviceName: `api-${config.apiLayout}`, endpoint: config.otelExporterOtlpEndpoint });
  const redis = createRedis(config, 'client', { commandTimeout: 1_000 });
  let app;
  try {
    app = buildApp(config, { database, redis });
  } catch (err) {
    if (err instanceof UploadDirectoryError) fail(`UPLOAD_DIR: ${err.message}`);
    throw err;
  }
  for (const warning of config.warnings) app.log.warn(warning);
  // Give Redis a moment so the first requests find the cache; an outage is logged by the app.
  await whenReady(redis, 3_000).ready;

  // Stop accepting, let in-flight requests finish, then close the pool and Redis (app onClose hooks).
  closeWithGrace({ delay: 10_000 }, async ({ signal, err }) => {
    if (err) app.log.error({ err }, 'shutting down after an error');
    else app.log.info({ signal }, 'shutting down');
    await app.close();
    await tracing?.shutdown();
  });

  try {
    await app.listen({ host: config.host, port: config.port });
  } catch (err) {
    failIfPortUnusable('api', err, config.port, 'PORT');
    throw err;
  }
  app.log.info({ layout: config.apiLayout, port: config.port }, 'api ready');
}

void main();
