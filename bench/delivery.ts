import { randomBytes } from 'node:crypto';
import autocannon from 'autocannon';
import { BenchDatabase, createBenchDatabase, createBenchRedisPrefix, withClient } from './lib/bench-database';
import {
  deliverThroughBareWorker,
  deliverThroughOurWorker,
  describeMeasurement,
  measureWorkers,
  subscribeOnly,
  waitForReceipts,
} from './lib/delivery-run';
import { pacedLoad } from './lib/paced-load';
import { formatNumber, formatSection, Section } from './lib/report';
import { Scope, withScope } from './lib/scope';
import { startApi, startBareWorker, startSink, startWorker } from './lib/services';
import { BenchSettings, loadBenchSettings } from './lib/settings';

/**
 * Webhooks delivered per second end to end (job added, delivery loaded, signed, sent,
 * received and verified by the sink, attempt recorded) with our worker, beside a bare BullMQ
 * worker doing an unsigned axios POST to the same sink; then the latency from a post's
 * commit to its webhook's receipt while posts are created through the api at a fixed rate.
 */
export async function runDeliveryBench(settings: BenchSettings): Promise<Section> {
  const scope = new Scope();
  try {
    const db = await createBenchDatabase(scope, settings.databaseUrl);
    const redisPrefix = createBenchRedisPrefix(scope, settings.redisUrl);
    const secret = newSecret();
    const sink = await startSink(scope, settings, { secret });
    const endpointId = await subscribeOnly(db, `${sink.url}/webhooks/posts`, secret);
    const warmup = Math.min(1_000, Math.ceil(settings.events / 10));

    const oursPrefix = `${redisPrefix}_w`;
    const ours = await withScope(async (inner) => {
      const worker = await startWorker(inner, settings, db.url, oursPrefix, 'webhook-worker');
      return measureWorkers(
        [worker],
        () => deliverThroughOurWorker(settings, db, oursPrefix, sink, endpointId, warmup, tag()),
        () => deliverThroughOurWorker(settings, db, oursPrefix, sink, endpointId, settings.events, tag()),
      );
    });
    const barePrefix = `${redisPrefix}_bare`;
    const bare = await withScope(async (inner) => {
      const worker = await startBareWorker(inner, settings, barePrefix, BARE_QUEUE);
      return measureWorkers(
        [worker],
        () => deliverThroughBareWorker(settings, barePrefix, BARE_QUEUE, sink, warmup, tag()),
        () => deliverThroughBareWorker(settings, barePrefix, BARE_QUEUE, sink, settings.events, tag()),
      );
    });
    const recordingPrefix = `${redisPrefix}_rec`;
    const recording = await withScope(async (inner) => {
      const worker = await startBareWorker(inner, settings, recordingPrefix, BARE_QUEUE, db.url);
      const recorded = { db, endpointId };
      return measureWorkers(
        [worker],
        () => deliverThroughBareWorker(settings, recordingPrefix, BARE_QUEUE, sink, warmup, tag(), recorded),
        () => deliverThroughBareWorker(settings, recordingPrefix, BARE_QUEUE, sink, settings.events, tag(), recorded),
      );
    });
    const latency = await withScope((inner) => measureLatency(inner, settings, db, `${redisPrefix}_l`, 'paced'));
    const burst = await withScope((inner) => measureLatency(inner, settings, db, `${redisPrefix}_lb`, 'burst'));

    return {
      title: `Delivery (${formatNumber(settings.events)} webhooks, worker concurrency ${settings.workerConcurrency})`,
      figures: [
        {
          name: 'webhooks delivered end to end',
          unit: 'webhooks/s',
          ours: ours.run.perSecond,
          problem:
            ours.run.succeeded === ours.run.events
              ? undefined
              : `${formatNumber(ours.run.succeeded ?? 0)} of ${formatNumber(ours.run.events)} recorded as succeeded`,
          oursDetail: describeMeasurement(ours),
          baseline: { name: 'bare BullMQ + axios, unsigned', value: bare.run.perSecond },
          baselineDetail: describeMeasurement(bare),
          goal: 0.9,
        },
        {
          name: 'the same, against a bare worker doing the same PostgreSQL bookkeeping',
          unit: 'webhooks/s',
          ours: ours.run.perSecond,
          baseline: { name: 'bare + 2 plain pg statements, unsigned', value: recording.run.perSecond },
          baselineDetail: describeMeasurement(recording),
        },
        {
          name: `post commit to receipt at ${settings.latencyRate} posts/s, p50`,
          unit: 'ms',
          ours: latency.p50,
          problem: latency.problem,
          oursDetail: `${formatNumber(latency.count)} webhooks, ${formatNumber(latency.rate)} posts/s achieved`,
        },
        {
          name: `post commit to receipt at ${settings.latencyRate} posts/s, p99`,
          unit: 'ms',
          ours: latency.p99,
          problem: latency.problem ?? rateProblem(latency.rate, settings.latencyRate),
          oursDetail: `max ${formatNumber(latency.max)} ms, ${formatNumber(latency.rate)} posts/s achieved`,
          below: 100,
        },
        {
          name: `the same posts sent as autocannon's overallRate sends them (each second's ${settings.latencyRate} in one burst), p99`,
          unit: 'ms',
          ours: burst.p99,
          problem: burst.problem ?? rateProblem(burst.rate, settings.latencyRate),
          oursDetail: `p50 ${formatNumber(burst.p50)} ms, max ${formatNumber(burst.max)} ms, ${formatNumber(burst.rate)} posts/s achieved`,
        },
        ...(['api', 'worker'] as const).map((service) => ({
          name: `peak RSS of the ${service} under ${settings.latencyRate} posts/s`,
          unit: 'MB',
          ours: latency.peakRssBytes[service] / 2 ** 20,
          problem: latency.problem,
          below: 150,
        })),
      ],
      notes: [
        "Ours: the delivery rows are written as the outbox writes them, then their jobs are added with the outbox's own `addDeliveryJobs`; the clock runs from the first job added until the sink has every webhook and the worker has recorded every one as succeeded. Each attempt claims and loads the delivery with its endpoint (one statement), signs (X-Signature and webhook-signature), POSTs, and records the attempt and status (one statement).",
        'Bare: the job carries URL and body; the worker POSTs it unsigned with axios and records nothing. Same sink, same body (about 500 bytes), same concurrency and bounded job retention, each after a warm-up batch.',
        'Bare with bookkeeping (a reference, no goal): the bare worker plus the least PostgreSQL work our design needs, with plain pg: one statement claims and loads the delivery row, one records the attempt and the outcome; unsigned, no retry policy. It separates the cost of recording every delivery (the design) from the cost of how our worker does it.',
        'The sink verifies X-Signature with our module whenever the header is present and counts each webhook-id once. Worker CPU is the worker process only; PostgreSQL, Redis and the sink share the same cores.',
        "Latency: posts are created through api layout b at a steady rate, open loop (post i leaves at i / rate whether or not the earlier ones were answered; `bench/lib/paced-load.ts`), with one worker running and one endpoint subscribed; the sink subtracts the event's `created_at` (set by PostgreSQL inside the creating transaction, so slightly before commit) from its receipt time. The p99 goal holds only at the asked rate: below 95 % of it achieved, the figure is marked invalid.",
        "Burst (a reference, no goal): autocannon's `overallRate` gives each connection a budget per second that it spends as fast as the api answers, so each second's posts arrive together at its start; the p99 there is the time to clear a second's posts at once.",
        'Peak RSS: VmRSS of the api and of the worker process, sampled every 100 ms from the first post until the last webhook is received.',
        "Our worker and api run with the node options of their start commands (`NODE_HEAP_FLAGS`, scripts/services.ts: V8 heap sizing); the bare workers with node's defaults.",
      ],
    };
  } finally {
    await scope.close();
  }
}

const BARE_QUEUE = 'bare-webhooks';

interface Latency {
  /** Set when fewer webhooks arrived than posts were created, or none at all. */
  problem?: string;
  count: number;
  rate: number;
  p50: number;
  p99: number;
  max: number;
  /** Highest VmRSS sampled during the measured run, bytes. */
  peakRssBytes: { api: number; worker: number };
}

/** Set when the achieved rate is under 95 % of the asked one, so a latency at a lower load is not read as the goal's. */
function rateProblem(achieved: number, asked: number): string | undefined {
  return achieved < asked * 0.95 ? `only ${formatNumber(achieved)} of ${formatNumber(asked)} posts/s achieved` : undefined;
}

async function measureLatency(
  scope: Scope,
  settings: BenchSettings,
  db: BenchDatabase,
  redisPrefix: string,
  mode: 'paced' | 'burst',
): Promise<Latency> {
  const secret = newSecret();
  const sink = await startSink(scope, settings, { secret, latency: true });
  const endpointId = await subscribeOnly(db, `${sink.url}/webhooks/posts`, secret);
  const worker = await startWorker(scope, settings, db.url, redisPrefix, 'webhook-worker-latency');
  const api = await startApi(scope, settings, db.url, redisPrefix, 'b');
  const options = {
    url: api.url,
    // Enough connections that the client never caps the rate: each sends about 4 requests a second.
    connections: Math.max(32, Math.ceil(settings.latencyRate / 4)),
    overallRate: settings.latencyRate,
    headers: { authorization: `Bearer ${db.token}`, user_id: String(db.userId), 'content-type': 'application/json' },
    requests: [{ method: 'POST', path: '/api/v1/posts', body: JSON.stringify({ title: 'Latency post', content: 'Created at a fixed rate.' }) }],
  };
  const load = async (amount: number): Promise<{ ok: number; durationS: number }> => {
    if (mode === 'burst') {
      const result = await autocannon({ ...options, amount });
      return { ok: result['2xx'], durationS: result.duration };
    }
    const request = { method: 'POST', url: `${api.url}${options.requests[0].path}`, headers: options.headers, body: options.requests[0].body };
    return pacedLoad(request, settings.latencyRate, amount);
  };
  // Layout B answers HTTP 200 even when an insert fails, so the outbox rows tell how many events to expect.
  await load(Math.ceil(settings.latencyRate * settings.apiWarmupS));
  await waitForReceipts(sink, await countDeliveries(db, endpointId));
  await sink.reset();
  const before = await countDeliveries(db, endpointId);
  const peakRssBytes = { api: api.child.rssBytes(), worker: worker.rssBytes() };
  const sampler = setInterval(() => {
    peakRssBytes.api = Math.max(peakRssBytes.api, api.child.rssBytes());
    peakRssBytes.worker = Math.max(peakRssBytes.worker, worker.rssBytes());
  }, 100);
  let stats: Awaited<ReturnType<typeof waitForReceipts>>;
  let result: { ok: number; durationS: number };
  let expected: number;
  try {
    result = await load(settings.latencyEvents);
    expected = (await countDeliveries(db, endpointId)) - before;
    stats = await waitForReceipts(sink, expected);
  } finally {
    clearInterval(sampler);
  }
  const problem =
    expected === 0 || stats.latency.count < result.ok
      ? `${formatNumber(result.ok)} posts answered 2xx, ${formatNumber(expected)} events recorded, ${formatNumber(stats.latency.count)} received`
      : undefined;
  return { ...stats.latency, rate: result.ok / result.durationS, problem, peakRssBytes };
}

async function countDeliveries(db: BenchDatabase, endpointId: number): Promise<number> {
  return withClient(db.url, async (client) =>
    Number((await client.query('SELECT count(*) AS n FROM webhook_deliveries WHERE endpoint_id = $1', [endpointId])).rows[0].n),
  );
}

function newSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

function tag(): string {
  return `b${randomBytes(4).toString('hex')}`;
}

if (require.main === module) {
  runDeliveryBench(loadBenchSettings()).then(
    (section) => process.stdout.write(formatSection(section)),
    (error: unknown) => {
      process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
      process.exitCode = 1;
    },
  );
}
