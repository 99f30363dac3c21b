import { Worker } from 'bullmq';
import type { Logger } from 'pino';
import type { Config } from '../../../shared/config';
import type { Database } from '../../../shared/db';
import type { Metrics } from '../../../shared/metrics';
import {
  Outbox,
  WEBHOOK_QUEUE_NAME,
  WebhookJobData,
  WebhookJobName,
  WebhookQueue,
  createDeliveryGate,
  createEndpointRateLimiter,
  createOutbox,
  createWebhookQueue,
  listOpenCircuits,
  queueRecordedDeliveries,
} from '../../../shared/queue';
import { createRedis, describeRedisTarget, logRedisOutages, RedisClient } from '../../../shared/redis';
import { createDeliveryStore } from './delivery-store';
import { createHttpSender } from './http-sender';
import { createDeliveryProcessor } from './process-delivery';
import { Retention, createRetention } from './retention';
import { createRetryPolicy } from './retry-policy';
import { traceAttempts, traceDeliveryJobs } from './tracing';

/** Options of {@link createWebhookWorker}. */
export interface WebhookWorkerOptions {
  config: Config;
  db: Database;
  logger: Logger;
  metrics?: Metrics;
  /**
   * The watchdog for BullMQ issue 3185 (a worker whose Redis connection dropped and never
   * came back ready stops taking jobs for good): it checks every `intervalMs` (default
   * 5000) and replaces the BullMQ worker after `graceMs` (default 30000) of not being ready.
   */
  watchdog?: { intervalMs?: number; graceMs?: number };
  /** Jitter source of the retry policy, uniform in [0, 1); tests pin it. */
  random?: () => number;
  /** Run the outbox relay in this process too (default true), so recovery never waits for an api. */
  relay?: boolean;
  /** Schedule and run the daily retention prune (default true). */
  retention?: boolean;
}

export interface WebhookWorker {
  /** Resolves once the current BullMQ worker is connected to Redis. */
  waitUntilReady(): Promise<void>;
  /** True while the worker runs and both of its Redis connections are ready. */
  isReady(): boolean;
  /** How many times the watchdog has replaced the BullMQ worker. */
  readonly recreations: number;
  /** The BullMQ worker in use now; the watchdog may replace it. */
  readonly current: Worker<WebhookJobData, void, WebhookJobName>;
  /** The producer side this worker uses for its own deliveries (notices) and the relay. */
  readonly queue: WebhookQueue;
  readonly outbox: Outbox;
  readonly retention: Retention;
  /** Sets `webhook_circuit_state` from Redis; the metrics server calls it before each scrape. */
  refreshMetrics(): Promise<void>;
  /**
   * Stops taking jobs and waits up to `timeoutMs` for the ones in flight, then drops the
   * Redis connections; jobs still running are recovered by BullMQ's stalled-job check in
   * another worker (at-least-once, same webhook-id).
   * @returns whether the bound was hit
   */
  close(timeoutMs: number): Promise<{ forced: boolean }>;
}

interface Instance {
  worker: Worker<WebhookJobData, void, WebhookJobName>;
  connection: RedisClient;
  blocking?: { status: string };
}

/** Several lock renewals must be missed before a live job counts as stalled (BullMQ docs, "Stalled Jobs"). */
const MAX_STALLED_COUNT = 5;
/** An endpoint lease outlives the attempt's timeout by this much (recording it), then expires by itself. */
const LEASE_MARGIN_MS = 10_000;

/**
 * Starts a BullMQ worker on the `webhooks` queue with a `worker`-role connection
 * (`maxRetriesPerRequest: null`), WORKER_CONCURRENCY jobs at once, WORKER_LOCK_DURATION_MS
 * locks (the stalled check runs as often), one keep-alive HTTP client shared by every job
 * (through WEBHOOK_PROXY_URL when set; closed last), and the connection watchdog. A
 * `client`-role connection carries the endpoint gate (cap and circuit breaker), the queue for
 * the worker's own `endpoint.disabled` notices, and the outbox relay (revival after a Redis
 * loss).
 */
export function createWebhookWorker(options: WebhookWorkerOptions): WebhookWorker {
  const { config, logger } = options;
  const sender = createHttpSender({
    timeoutMs: config.webhookTimeoutMs,
    blockPrivate: config.webhookBlockPrivate,
    privateAllowlist: config.webhookPrivateAllowlist,
    logger,
    maxSockets: config.workerConcurrency,
    proxyUrl: config.webhookProxyUrl,
    noProxy: config.webhookNoProxy,
  });
  const client = createRedis(config, 'client');
  client.on('error', (error) => logger.debug({ err: error }, 'worker client redis connection error'));
  const queue = createWebhookQueue(config, client, logger);
  const outbox = createOutbox({
    db: options.db,
    queue,
    logger,
    relayIntervalMs: config.outboxRelayIntervalMs,
    reviveAfterMs: config.outboxReviveAfterMs,
  });
  const processor = createDeliveryProcessor({
    config,
    store: createDeliveryStore(options.db.sequelize, { disableAfterS: config.webhookDisableAfterS }),
    sender: traceAttempts(sender),
    policy: createRetryPolicy(config.webhookRetrySchedule, options.random),
    gate: createDeliveryGate(client, {
      prefix: config.redisPrefix,
      concurrency: config.webhookEndpointConcurrency,
      breakerFailures: config.webhookBreakerFailures,
      leaseTtlMs: config.webhookTimeoutMs + LEASE_MARGIN_MS,
    }),
    rateLimiter: createEndpointRateLimiter(client, config.redisPrefix),
    queueNotices: (ids) => queueRecordedDeliveries({ db: options.db, queue, logger }, ids),
    wake: (ids) => wakeDeliveries(ids),
    logger,
    metrics: options.metrics,
    random: options.random,
  });
  if (options.relay ?? true) outbox.startRelay();

  async function wakeDeliveries(ids: string[]): Promise<void> {
    for (const id of ids) {
      const job = await queue.getJob(id);
      if (!job) {
        await queueRecordedDeliveries({ db: options.db, queue, logger }, [id]);
        continue;
      }
      // Not in the delayed set: already waiting or running, and a running one checks again once parked.
      await job.promote().catch(() => undefined);
    }
  }
  const retention = createRetention({ config, sequelize: options.db.sequelize, logger, schedule: options.retention ?? true });
  const tracedProcessor = traceDeliveryJobs(processor, options.db.sequelize);
  const intervalMs = options.watchdog?.intervalMs ?? 5_000;
  const graceMs = options.watchdog?.graceMs ?? 30_000;

  function start(): Instance {
    const connection = createRedis(config, 'worker');
    const outages = logRedisOutages(connection, logger, `Redis at ${describeRedisTarget(config)}`, 'no deliveries until it answers');
    const worker = new Worker<WebhookJobData, void, WebhookJobName>(WEBHOOK_QUEUE_NAME, tracedProcessor, {
      connection,
      prefix: config.redisPrefix,
      concurrency: config.workerConcurrency,
      lockDuration: config.workerLockDurationMs,
      stalledInterval: config.workerLockDurationMs,
      maxStalledCount: MAX_STALLED_COUNT,
    });
    const instance: Instance = { worker, connection };
    // During an outage BullMQ repeats each failed reconnect here too: the outage log has it.
    worker.on('error', (error) => (outages.down ? logger.debug({ err: error }, 'webhook worker error') : logger.warn({ err: error }, 'webhook worker error')));
    worker.on('failed', (job, error) => {
      logger.error({ deliveryId: job?.data.deliveryId, err: error }, 'delivery job failed; BullMQ retries it');
    });
    worker
      .waitUntilReady()
      .then(async () => {
        instance.blocking = await worker.getBackend().blockingClient;
      })
      .catch((error) => logger.warn({ err: error }, 'webhook worker did not become ready'));
    return instance;
  }

  function ready(instance: Instance): boolean {
    return instance.connection.status === 'ready' && instance.blocking?.status === 'ready' && instance.worker.isRunning();
  }

  async function retire(instance: Instance): Promise<void> {
    await instance.worker.disconnect().catch(() => undefined);
    void instance.worker.close(true).catch(() => undefined);
    instance.connection.disconnect();
  }

  let current = start();
  let recreations = 0;
  let closing = false;
  let notReadySince: number | undefined;
  const watchdog = setInterval(() => {
    if (closing) return;
    if (ready(current)) {
      notReadySince = undefined;
      return;
    }
    notReadySince ??= Date.now();
    if (Date.now() - notReadySince < graceMs) return;
    logger.warn({ notReadyMs: Date.now() - notReadySince }, 'worker connection not ready; recreating the worker');
    const old = current;
    current = start();
    recreations += 1;
    notReadySince = undefined;
    void retire(old);
  }, intervalMs);
  watchdog.unref();

  return {
    waitUntilReady: () => current.worker.waitUntilReady(),
    isReady: () => ready(current),
    get recreations() {
      return recreations;
    },
    get current() {
      return current.worker;
    },
    queue,
    outbox,
    retention,
    async refreshMetrics() {
      const gauge = options.metrics?.circuitState;
      if (!gauge) return;
      const circuits = await listOpenCircuits(client, config.redisPrefix);
      gauge.reset();
      for (const { gateKey, state } of circuits) gauge.set({ gate: gateKey, state }, state === 'open' ? 1 : 0.5);
    },
    async close(timeoutMs) {
      closing = true;
      clearInterval(watchdog);
      let timer: NodeJS.Timeout | undefined;
      const finished = await Promise.race([
        current.worker.close().then(() => true),
        new Promise<false>((resolve) => {
          timer = setTimeout(() => resolve(false), timeoutMs);
        }),
      ]);
      clearTimeout(timer);
      if (!finished) await retire(current);
      else await current.connection.quit().catch(() => current.connection.disconnect());
      await outbox.stop();
      await retention.close();
      await queue.close().catch(() => undefined);
      await client.quit().catch(() => client.disconnect());
      sender.close();
      return { forced: !finished };
    },
  };
}
