import closeWithGrace from 'close-with-grace';
import pino from 'pino';
import { ConfigError, loadConfig } from '../../../shared/config';
import { createDatabase } from '../../../shared/db';
import { createLogger, failIfPortUnusable, failStart } from '../../../shared/logging';
import { createMetrics } from '../../../shared/metrics';
import { startTracing } from '../../../shared/tracing';
import { createMetricsServer } from './metrics-server';
import { createWebhookWorker } from './worker';

/** Database connections: enough for the claim and record queries of concurrent jobs. */
const MAX_POOL = 20;

/**
 * The webhook-worker process (`npm run start:worker`). Shutdown on SIGINT/SIGTERM: stop the
 * HTTP side, stop taking jobs and finish those in flight within WORKER_SHUTDOWN_TIMEOUT_MS
 * (the rest return to the queue through BullMQ's stalled-job recovery), then close Redis and
 * the database, in the reverse order of opening.
 */
async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig(process.env, 'worker');
  } catch (err) {
    if (err instanceof ConfigError) failStart('webhook-worker', err.message);
    throw err;
  }
  const logger = createLogger(config, { service: 'webhook-worker' });
  for (const warning of config.warnings) logger.warn(warning);

  const tracing = await startTracing({ serviceName: 'webhook-worker', endpoint: config.otelExporterOtlpEndpoint });
  const db = createDatabase(config.databaseUrl, { poolMax: Math.min(config.workerConcurrency, MAX_POOL) });
  await db.ping();
  const metrics = createMetrics('webhook-worker');
  const worker = createWebhookWorker({ config, db, logger, metrics });
  const server = config.workerMetricsPort === 0 ? undefined : createMetricsServer({ db, worker, metrics });
  if (server) {
    try {
      await server.listen({ host: config.host, port: config.workerMetricsPort });
    } catch (err) {
      failIfPortUnusable('webhook-worker', err, config.workerMetricsPort, 'WORKER_METRICS_PORT');
      throw err;
    }
  }

  closeWithGrace({ delay: config.workerShutdownTimeoutMs + 5_000 }, async ({ signal, err }) => {
    if (err) logger.error({ err }, 'webhook worker failed');
    logger.info({ signal }, 'webhook worker shutting down');
    await server?.close();
    const { forced } = await worker.close(config.workerShutdownTimeoutMs);
    if (forced) logger.warn('jobs still in flight were left to stalled-job recovery');
    await db.close();
    await tracing?.shutdown();
  });

  worker
    .waitUntilReady()
    .then(() =>
      logger.info(
        { concurrency: config.workerConcurrency, queue: 'webhooks', partitions: worker.shards, egressProxy: describeProxy(config) },
        'webhook worker ready',
      ),
    )
    .catch((error) => logger.error({ err: error }, 'webhook worker could not connect to Redis'));
}

/** WEBHOOK_PROXY_URL's host and port for the log, without its credentials; null when none is set. */
function describeProxy(config: { webhookProxyUrl?: string }): string | null {
  return config.webhookProxyUrl === undefined ? null : new URL(config.webhookProxyUrl).host;
}

main().catch((error) => {
  pino().fatal({ err: error }, 'webhook worker could not start');
  // Whatever was opened before the failure must not keep a half-started worker alive.
  process.exit(1);
});
