import type { Worker } from 'bullmq';
import type { Logger } from 'pino';
import type { Config } from '../../../shared/config';
import type { Database } from '../../../shared/db';
import type { Metrics } from '../../../shared/metrics';
import { EndpointRateLimiter, createDeliveryGates, createEndpointRateLimiter, listOpenCircuits } from '../../../shared/endpoint-gate';
import {
  WebhookJobData,
  WebhookJobName,
  WebhookQueue,
  createWebhookQueue,
  currentShards,
  shardQueueName,
} from '../../../shared/queue';
import { queueRecordedDeliveries } from '../../../shared/deliveries/enqueue';
import { Outbox, createOutbox } from '../../../shared/deliveries/outbox';
import { startDayPartitionKeeper } from '../../../shared/db/partition-keeper';
import { createRedis, describeRedisTarget, logRedisOutages, RedisClient, redisPrimaryOf } from '../../../shared/redis';
import { createSlotPool } from './slot-pool';
import { createDeliveryStore } from './delivery-store';
import { createDestinations } from './destinations';
import { ShardWorker } from './shard-worker';
import { ShardGates, createDeliveryProcessor } from './process-delivery';
import { Retention, createRetention } from './retention';
import { startStatsFolder } from './stats-folder';
import { createRetryPolicy } from './retry-policy';
import { traceDeliveryJobs } from './tracing';

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
  /** True while the worker runs and its Redis connections (commands, each partition's blocking one) are ready. */
  isReady(): boolean;
  /** How many times the watchdog has replaced the BullMQ workers. */
  readonly recreations: number;
  /** The BullMQ worker of the first partition drained now; the watchdog may replace it. */
  readonly current: Worker<WebhookJobData, void, WebhookJobName>;
  /** The queue shards this worker drains now, ascending. */
  readonly shards: number[];
  /** Looks again for partitions to drain (a change of the count elsewhere); runs every 10 s by itself. */
  refreshShards(): Promise<void>;
  /** The producer side this worker uses for its own deliveries (notices) and the relay. */
  readonly queue: WebhookQueue;
  readonly outbox: Outbox;
  readonly retention: Retention;
  /** Sets `webhook_circuit_state` from Redis; the metrics server calls it before each scrape. */
  refreshMetrics(): Promise<void>;
  /** With Redis Sentinel, the primary the worker's command connection uses now (`host:port`), else undefined. */
  redisPrimary(): string | undefined;
  /**
   * Stops taking jobs and waits up to `timeoutMs` for the ones in flight, then drops the
   * Redis connections; jobs still running are recovered by BullMQ's stalled-job check in
   * another worker (at-least-once, same webhook-id).
   * @returns whether the bound was hit
   */
  close(timeoutMs: number): Promise<{ forced: boolean }>;
}

/** One BullMQ worker per partition, over one command connection; the watchdog replaces them together. */
interface Instance {
  connection: RedisClient;
  workers: Map<number, { worker: ShardWorker; blocking?: { status: string } }>;
}

/** Several lock renewals must be missed before a live job counts as stalled (BullMQ docs, "Stalled Jobs"). */
const MAX_STALLED_COUNT = 5;
/** An endpoint lease outlives the attempt's timeout by this much (recording it), then expires by itself. */
const LEASE_MARGIN_MS = 10_000;
/** How often a worker looks for partitions a change of the count added, ms. */
const SHARDS_REFRESH_MS = 10_000;

/**
 * Starts one BullMQ worker per partition of the `webhooks` queue that may hold jobs (the
 * current ones and every one up to the highest count ever used, looked for again every 10 s;
 * docs/design.md §13.1) over one `worker`-role connection (`maxRetriesPerRequest: null`; BullMQ adds a
 * blocking one per partition), WORKER_CONCURRENCY jobs at once across all of them (a shared
 * slot pool, slot-pool.ts), WORKER_LOCK_DURATION_MS locks (the stalled check runs as often),
 * the destinations shared by every job (destinations/: the keep-alive HTTP client, through
 * WEBHOOK_PROXY_URL when set; closed last), and the connection watchdog. A
 * `client`-role connection carries each partition's endpoint gate (cap and circuit breaker)
 * and rate limiter, the queue for the worker's own `endpoint.disabled` notices, and the
 * outbox relay (revival after a Redis loss).
 */
export function createWebhookWorker(options: WebhookWorkerOptions): WebhookWorker {
  const { config, logger } = options;
  const destinations = createDestinations({ config, logger, random: options.random ?? Math.random });
  const client = createRedis(config, 'client');
  client.on('error', (error) => logger.debug({ err: error }, 'worker client redis connection error'));
  const queue = createWebhookQueue(config, client, logger);
  const pool = createSlotPool(config.workerConcurrency);
  const gateOf = createDeliveryGates(
    client,
    {
      prefix: config.redisPrefix,
      concurrency: config.webhookEndpointConcurrency,
      breakerFailures: config.webhookBreakerFailures,
      leaseTtlMs: config.webhookTimeoutMs + LEASE_MARGIN_MS,
    },
    { batchAcrossShards: config.redisClusterNodes.length === 0 },
  );
  const limiters = new Map<number, EndpointRateLimiter>();
  const gatesOf = (shard: number): ShardGates => {
    let rateLimiter = limiters.get(shard);
    if (!rateLimiter) {
      rateLimiter = createEndpointRateLimiter(client, config.redisPrefix, shard);
      limiters.set(shard, rateLimiter);
    }
    return { gate: gateOf(shard), rateLimiter };
  };
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
    destinations,
    policy: createRetryPolicy(config.webhookRetrySchedule, options.random),
    gates: gatesOf,
    queueNotices: (ids) => queueRecordedDeliveries({ db: options.db, queue, logger }, ids),
    wake: (ids, shard) => wakeDeliveries(ids, shard),
    logger,
    metrics: options.metrics,
    random: options.random,
  });
  if (options.relay ?? true) outbox.startRelay();

  async function wakeDeliveries(ids: string[], shard: number): Promise<void> {
    for (const id of ids) {
      const job = await queue.getJob(id, shard);
      if (!job) {
        await queueRecordedDeliveries({ db: options.db, queue, logger }, [id]);
        continue;
      }
      // Not in the delayed set: already waiting or running, and a running one checks again once parked.
      await job.promote().catch(() => undefined);
    }
  }
  // docs/design.md §3.5: the day partitions ahead, at start and every MAINTENANCE_INTERVAL_MS, whatever Redis holds.
  const keeper = startDayPartitionKeeper({ sequelize: options.db.sequelize, logger, intervalMs: config.maintenanceIntervalMs });
  const statsFolder = startStatsFolder({ sequelize: options.db.sequelize, logger });
  const retention = createRetention({ config, sequelize: options.db.sequelize, logger, metrics: options.metrics, schedule: options.retention ?? true });
  const tracedProcessor = traceDeliveryJobs(processor, options.db.sequelize);
  const intervalMs = options.watchdog?.intervalMs ?? 5_000;
  const graceMs = options.watchdog?.graceMs ?? 30_000;

  let shards = currentShards(queue.count);
  let closing = false;

  function drain(instance: Instance, shard: number, outages: { down: boolean }): void {
    const worker = new ShardWorker(
      shardQueueName(shard),
      tracedProcessor,
      {
        connection: instance.connection,
        prefix: config.redisPrefix,
        lockDuration: config.workerLockDurationMs,
        stalledInterval: config.workerLockDurationMs,
        maxStalledCount: MAX_STALLED_COUNT,
      },
      pool,
    );
    const entry: { worker: ShardWorker; blocking?: { status: string } } = { worker };
    instance.workers.set(shard, entry);
    // During an outage BullMQ repeats each failed reconnect here too: the outage log has it.
    worker.on('error', (error) =>
      outages.down ? logger.debug({ err: error, partition: shard }, 'webhook worker error') : logger.warn({ err: error, partition: shard }, 'webhook worker error'),
    );
    worker.on('failed', (job, error) => {
      logger.error({ deliveryId: job?.data.deliveryId, err: error }, 'delivery job failed; BullMQ retries it');
    });
    worker
      .waitUntilReady()
      .then(async () => {
        entry.blocking = await worker.getBackend().blockingClient;
      })
      .catch((error) => logger.warn({ err: error, partition: shard }, 'webhook worker did not become ready'));
  }

  const outagesOf = new WeakMap<Instance, { down: boolean }>();
  function start(): Instance {
    const connection = createRedis(config, 'worker');
    const outages = logRedisOutages(connection, logger, `Redis at ${describeRedisTarget(config)}`, 'no deliveries until it answers');
    const instance: Instance = { connection, workers: new Map() };
    outagesOf.set(instance, outages);
    for (const shard of shards) drain(instance, shard, outages);
    return instance;
  }

  function ready(instance: Instance): boolean {
    if (instance.connection.status !== 'ready') return false;
    return [...instance.workers.values()].every(({ worker, blocking }) => blocking?.status === 'ready' && worker.isRunning());
  }

  async function retire(instance: Instance): Promise<void> {
    await Promise.all(
      [...instance.workers.values()].map(async ({ worker }) => {
        await worker.disconnect().catch(() => undefined);
        void worker.close(true).catch(() => undefined);
      }),
    );
    instance.connection.disconnect();
  }

  let current = start();
  let refreshing: Promise<void> | undefined;

  /** Starts draining the partitions a change of the count added; they are never dropped while the process runs. */
  async function refreshShards(): Promise<void> {
    const found = await queue.shards();
    const added = found.filter((shard) => !shards.includes(shard));
    if (added.length === 0 || closing) return;
    shards = [...shards, ...added].sort((a, b) => a - b);
    logger.info({ partitions: added }, 'draining queue partitions a change of WEBHOOK_QUEUE_PARTITIONS left');
    const outages = outagesOf.get(current) ?? { down: false };
    for (const shard of added) drain(current, shard, outages);
  }
  const refresh = () => {
    refreshing ??= refreshShards()
      .catch((error) => logger.debug({ err: error }, 'could not look for queue partitions; trying again later'))
      .finally(() => {
        refreshing = undefined;
      });
  };
  // At once when the connection is (back) up: a fresh one refuses commands until then.
  client.on('ready', refresh);
  if (client.status === 'ready') refresh();
  const refresher = setInterval(refresh, SHARDS_REFRESH_MS);
  refresher.unref();
  let recreations = 0;
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
    async waitUntilReady() {
      await Promise.all([...current.workers.values()].map(async ({ worker }) => worker.waitUntilReady()));
    },
    isReady: () => ready(current),
    get recreations() {
      return recreations;
    },
    get current() {
      return [...current.workers.values()][0].worker;
    },
    get shards() {
      return [...shards];
    },
    async refreshShards() {
      refresh();
      await refreshing;
    },
    queue,
    outbox,
    retention,
    redisPrimary: () => redisPrimaryOf(current.connection),
    async refreshMetrics() {
      const primary = redisPrimaryOf(current.connection);
      options.metrics?.redisPrimary.reset();
      if (primary) options.metrics?.redisPrimary.set({ address: primary }, 1);
      const gauge = options.metrics?.circuitState;
      if (!gauge) return;
      const circuits = await listOpenCircuits(client, config.redisPrefix, shards);
      gauge.reset();
      for (const { gateKey, state } of circuits) gauge.set({ gate: gateKey, state }, state === 'open' ? 1 : 0.5);
    },
    async close(timeoutMs) {
      closing = true;
      clearInterval(watchdog);
      clearInterval(refresher);
      client.off('ready', refresh);
      await refreshing;
      let timer: NodeJS.Timeout | undefined;
      const finished = await Promise.race([
        Promise.all([...current.workers.values()].map(async ({ worker }) => worker.close())).then(() => true),
        new Promise<false>((resolve) => {
          timer = setTimeout(() => resolve(false), timeoutMs);
        }),
      ]);
      clearTimeout(timer);
      if (!finished) await retire(current);
      else await current.connection.quit().catch(() => current.connection.disconnect());
      await outbox.stop();
      await retention.close();
      await keeper.close();
      await statsFolder.close();
      await queue.close().catch(() => undefined);
      await client.quit().catch(() => client.disconnect());
      destinations.close();
      return { forced: !finished };
    },
  };
}
