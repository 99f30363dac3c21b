import { randomBytes } from 'node:crypto';
import { createServer, Socket } from 'node:net';
import { Redis } from 'ioredis';
import { addDeliveryJobs, createWebhookQueue } from '../shared/queue';
import { createRedis } from '../shared/redis';
import { newWebhookId } from '../shared/webhook/signing';
import { startPrivateRedis } from './capacity';
import { createBenchDatabase, withClient } from './lib/bench-database';
import { sleep } from './lib/children';
import { EVENT_BODY } from './lib/delivery-run';
import { freePort } from './lib/net';
import { Figure, formatNumber, Section } from './lib/report';
import { Scope } from './lib/scope';
import { startWorker } from './lib/services';
import { BenchSettings } from './lib/settings';

/** Attempts to the unanswering endpoint time out after this (WEBHOOK_TIMEOUT_MS), ms. */
const TIMEOUT_MS = 5_000;

/**
 * What a worker costs while deliveries wait on an endpoint that never answers (issue: parked,
 * not polled): `parkedDeliveries` deliveries to one endpoint that accepts connections and
 * never replies. Ten attempts hold the endpoint's leases until they time out, the rest wait
 * behind the cap, and the failures open the circuit. The worker's CPU is read from /proc over
 * `parkedWindowS` seconds, first idle (the baseline, same process) and then with every
 * delivery waiting, and the Redis commands of that window from a Redis server of the run's own.
 */
export async function runParkedBench(settings: BenchSettings): Promise<Section> {
  const scope = new Scope();
  try {
    const redisPort = await freePort();
    await startPrivateRedis(scope, redisPort);
    const local: BenchSettings = { ...settings, redisUrl: `redis://127.0.0.1:${redisPort}` };
    const db = await createBenchDatabase(scope, settings.databaseUrl);
    const endpointUrl = await startSilentEndpoint(scope);
    const prefix = `pwpark${randomBytes(3).toString('hex')}`;
    const worker = await startWorker(scope, local, db.url, prefix, 'webhook-worker-parked', settings.workerConcurrency, {
      WEBHOOK_ENDPOINT_CONCURRENCY: '10',
      WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
    });
    const redis = new Redis(redisPort, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 1 });
    scope.add('parked redis client', async () => void redis.disconnect());
    await redis.connect();

    const windowMs = settings.parkedWindowS * 1000;
    const idle = await measure(worker.cpuSeconds, redis, windowMs);

    const ids = await insertDeliveries(db.url, endpointUrl, settings.parkedDeliveries);
    const connection = createRedis(local, 'client');
    const queue = createWebhookQueue({ redisPrefix: prefix }, connection);
    scope.add('parked queue', async () => {
      await queue.close();
      connection.disconnect();
    });
    await queue.waitUntilReady();
    await addDeliveryJobs(
      queue,
      ids.map((deliveryId) => ({ deliveryId })),
    );
    // Past the first timeouts: the circuit has opened and every job waits.
    await sleep(2 * TIMEOUT_MS + 2_000);
    const parked = await measure(worker.cpuSeconds, redis, windowMs);
    const attempts = await withClient(db.url, async (client) => Number((await client.query('SELECT count(*) AS n FROM webhook_attempts')).rows[0].n));

    const percent = (cpuS: number) => (cpuS / (windowMs / 1000)) * 100;
    const figures: Figure[] = [
      {
        name: `worker CPU with ${formatNumber(settings.parkedDeliveries)} deliveries waiting on an unanswering endpoint`,
        unit: '% of a core',
        ours: percent(parked.cpuS),
        baseline: { name: 'the same worker idle', value: percent(idle.cpuS) },
        below: 2,
        oursDetail: `${((parked.cpuS * 60_000) / windowMs).toFixed(2)} CPU s per minute; ${formatNumber(parked.commands)} Redis commands in ${settings.parkedWindowS} s, most ${parked.top} (idle: ${formatNumber(idle.commands)})`,
      },
    ];
    return {
      title: `Parked deliveries: a worker's cost while ${formatNumber(settings.parkedDeliveries)} deliveries wait on a dead endpoint`,
      figures,
      notes: [
        `One endpoint accepts connections and never answers; attempts time out after ${TIMEOUT_MS / 1000} s (WEBHOOK_TIMEOUT_MS), at most 10 at a time (WEBHOOK_ENDPOINT_CONCURRENCY), and the failures open its circuit. Jobs refused for the cap or while the probe is out are parked with the endpoint's gate and woken by the release of a lease; jobs behind the open circuit wait until it reopens. The worker's CPU (/proc, user and system) is measured over ${settings.parkedWindowS} s (\`BENCH_PARKED_WINDOW_S\`) while idle and then while every delivery waits; the Redis commands are those of a Redis server of the run's own. ${formatNumber(attempts)} attempts were made in all.`,
      ],
    };
  } finally {
    await scope.close();
  }
}

/** CPU seconds of the worker and Redis commands over `windowMs`, with the three most called. */
async function measure(cpuSeconds: () => number, redis: Redis, windowMs: number): Promise<{ cpuS: number; commands: number; top: string }> {
  const before = commandCounts(await redis.info('commandstats'));
  const cpuBefore = cpuSeconds();
  await sleep(windowMs);
  const cpuS = cpuSeconds() - cpuBefore;
  const after = commandCounts(await redis.info('commandstats'));
  const calls = [...after].map(([name, count]) => [name, count - (before.get(name) ?? 0)] as const).filter(([, count]) => count > 0);
  calls.sort((x, y) => y[1] - x[1]);
  return {
    cpuS,
    commands: calls.reduce((sum, [, count]) => sum + count, 0),
    top: calls
      .slice(0, 3)
      .map(([name, count]) => `${name} ${formatNumber(count)}`)
      .join(', '),
  };
}

function commandCounts(info: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) counts.set(match[1], Number(match[2]));
  return counts;
}

/** A TCP server on 127.0.0.1 that accepts every connection and never answers. */
async function startSilentEndpoint(scope: Scope): Promise<string> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  scope.add('silent endpoint', async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const { port } = server.address() as { port: number };
  return `http://127.0.0.1:${port}/hooks`;
}

/** One endpoint at `url` and `count` pending deliveries to it, queued as the outbox would. */
async function insertDeliveries(databaseUrl: string, url: string, count: number): Promise<string[]> {
  const ids = Array.from({ length: count }, () => newWebhookId());
  await withClient(databaseUrl, async (client) => {
    const { rows } = await client.query<{ id: number }>(
      `INSERT INTO webhook_endpoints (url, secret, events) VALUES ($1, $2, '{}') RETURNING id`,
      [url, `whsec_${randomBytes(32).toString('base64')}`],
    );
    await client.query(
      `INSERT INTO webhook_deliveries (id, created_at, endpoint_id, url, event, body, enqueued_at)
       SELECT id, webhook_id_time(id), $2, $3, 'post.created', $4, now() FROM unnest($1::text[]) AS id`,
      [ids, rows[0].id, url, EVENT_BODY],
    );
  });
  return ids;
}
