import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import autocannon from 'autocannon';
import { BenchDatabase, createBenchDatabase, createBenchRedisPrefix, withClient } from './lib/bench-database';
import { Build, THIS_BUILD } from './lib/children';
import {
  deliverThroughBareWorker,
  deliverThroughOurWorker,
  describeMeasurement,
  measureWorkers,
  subscribeOnly,
  waitForReceipts,
  WorkerMeasurement,
} from './lib/delivery-run';
import { pacedLoad } from './lib/paced-load';
import { Figure, formatNumber, formatSection, Section } from './lib/report';
import { Scope, withScope } from './lib/scope';
import { startApi, startBareWorker, startSink, startWorker } from './lib/services';
import { BenchSettings, loadBenchSettings } from './lib/settings';
import { median, roundRatios, takeTurns } from './lib/turns';

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
    const perRound = Math.max(1, Math.round(settings.events / settings.rounds));
    const warmup = Math.min(1_000, Math.ceil(perRound / 4));

    const oursPrefix = `${redisPrefix}_w`;
    const barePrefix = `${redisPrefix}_bare`;
    const recordingPrefix = `${redisPrefix}_rec`;
    // Its own database: our worker's outbox relay would re-add (and deliver) its pending rows,
    // which have no job in our worker's queue.
    const recordedDb = await createBenchDatabase(scope, settings.databaseUrl);
    const recorded = { db: recordedDb, endpointId: await subscribeOnly(recordedDb, `${sink.url}/webhooks/posts`, secret) };
    const [ours, bare, recording] = await withScope(async (inner) => {
      const workers = {
        ours: await startWorker(inner, settings, db.url, oursPrefix, 'webhook-worker'),
        bare: await startBareWorker(inner, settings, barePrefix, BARE_QUEUE),
        recording: await startBareWorker(inner, settings, recordingPrefix, BARE_QUEUE, recordedDb.url),
      };
      const contenders = [
        {
          name: 'ours',
          run: (events: number) => measureWorkers([workers.ours], () => deliverThroughOurWorker(settings, db, oursPrefix, sink, endpointId, events)),
        },
        {
          name: 'bare',
          run: (events: number) => measureWorkers([workers.bare], () => deliverThroughBareWorker(settings, barePrefix, BARE_QUEUE, sink, events, tag())),
        },
        {
          name: 'bare with bookkeeping',
          run: (events: number) =>
            measureWorkers([workers.recording], () => deliverThroughBareWorker(settings, recordingPrefix, BARE_QUEUE, sink, events, tag(), recorded)),
        },
      ];
      for (const contender of contenders) await contender.run(warmup);
      return takeTurns(
        settings.rounds,
        contenders.map((contender) => ({ name: contender.name, run: () => contender.run(perRound) })),
      );
    });
    // A database per point, as Layout B's random pids make creates slower as posts accumulate.
    const freshLatency = (prefix: string, mode: 'paced' | 'burst', rate: number) =>
      withScope(async (inner) => measureLatency(inner, settings, await createBenchDatabase(inner, settings.databaseUrl), prefix, mode, rate));
    const curve: Latency[] = [];
    for (const rate of settings.latencyRates) curve.push(await freshLatency(`${redisPrefix}_l${rate}`, 'paced', rate));
    const latency = curve.find((point) => point.askedRate === settings.latencyRate)!;
    const burst = await freshLatency(`${redisPrefix}_lb`, 'burst', settings.latencyRate);
    const throughput = (runs: readonly WorkerMeasurement[]) => median(runs.map((m) => m.run.perSecond));
    const incomplete = ours.filter((m) => m.run.succeeded !== m.run.events);

    return {
      title: `Delivery (${formatNumber(settings.events)} webhooks per contender in ${settings.rounds} rounds, worker concurrency ${settings.workerConcurrency})`,
      figures: [
        {
          name: 'webhooks delivered end to end',
          unit: 'webhooks/s',
          ours: throughput(ours),
          problem:
            incomplete.length === 0
              ? undefined
              : `${formatNumber(incomplete[0].run.succeeded ?? 0)} of ${formatNumber(incomplete[0].run.events)} recorded as succeeded in a round`,
          oursDetail: describeMeasurement(ours[ours.length - 1]),
          baseline: { name: 'bare BullMQ + axios, unsigned', value: throughput(bare) },
          baselineDetail: describeMeasurement(bare[bare.length - 1]),
          ratios: roundRatios(
            ours.map((m) => m.run.perSecond),
            bare.map((m) => m.run.perSecond),
          ),
          goal: 0.8,
        },
        {
          name: 'worker CPU per webhook delivered end to end',
          unit: 'ms',
          ours: median(ours.map((m) => m.cpuMsPerWebhook)),
          problem: incomplete.length === 0 ? undefined : 'a round did not record every webhook',
          limit: { name: 'bare BullMQ + axios, unsigned', value: median(bare.map((m) => m.cpuMsPerWebhook)) },
          below: 0.35,
        },
        {
          name: 'the same, against a bare worker doing the same PostgreSQL bookkeeping',
          unit: 'webhooks/s',
          ours: throughput(ours),
          baseline: { name: 'bare + 2 plain pg statements, unsigned', value: throughput(recording) },
          baselineDetail: describeMeasurement(recording[recording.length - 1]),
          ratios: roundRatios(
            ours.map((m) => m.run.perSecond),
            recording.map((m) => m.run.perSecond),
          ),
        },
        ...curve.flatMap((point): Figure[] => [
          {
            name: `post commit to receipt at ${formatNumber(point.askedRate)} posts/s, p50`,
            unit: 'ms',
            ours: point.p50,
            problem: point.problem,
            oursDetail: `${formatNumber(point.count)} webhooks, ${formatNumber(point.rate)} posts/s achieved, machine CPU ${point.machineCores.toFixed(2)} of ${availableParallelism()} cores`,
          },
          {
            name: `post commit to receipt at ${formatNumber(point.askedRate)} posts/s, p99`,
            unit: 'ms',
            ours: point.p99,
            problem: point.problem ?? rateProblem(point.rate, point.askedRate),
            oursDetail: `max ${formatNumber(point.max)} ms, ${formatNumber(point.rate)} posts/s achieved`,
            ...(point === latency ? { below: 100 } : {}),
          },
        ]),
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
        `Throughput: the three workers run side by side for the whole section, each on its own queue; after a warm-up batch each, they take turns, ${settings.rounds} rounds of ${formatNumber(perRound)} webhooks (order reversed every other round); webhooks/s is the median of the rounds, the ratio the median of the per-round ratios with their min-max.`,
        "Ours: the delivery rows are written as the outbox writes them, then their jobs are added with the outbox's own `addDeliveryJobs`; the clock runs from the first job added until the sink has every webhook and the worker has recorded every one as succeeded. Each attempt claims and loads the delivery with its endpoint (one statement), signs (X-Signature and webhook-signature), POSTs, and records the attempt and status (one statement).",
        'Bare: the job carries URL and body; the worker POSTs it unsigned with axios and records nothing. Same sink, same body (about 500 bytes), same concurrency and bounded job retention, each after a warm-up batch.',
        'Bare with bookkeeping (a reference, no goal): the bare worker plus the least PostgreSQL work our design needs, with plain pg: one statement claims and loads the delivery row, one records the attempt and the outcome; unsigned, no retry policy. It separates the cost of recording every delivery (the design) from the cost of how our worker does it.',
        'The sink verifies X-Signature with our module whenever the header is present and counts each webhook-id once. Worker CPU is the worker process only; PostgreSQL, Redis and the sink share the same cores.',
        `Latency, as a curve: at each rate (${settings.latencyRates.join(', ')} posts/s, ${settings.latencyDurationS} s of posts each) posts are created through api layout b, on a database of its own for each rate, at a steady rate, open loop (post i leaves at i / rate whether or not the earlier ones were answered; \`bench/lib/paced-load.ts\`), with one worker running and one endpoint subscribed; the sink subtracts the event's \`created_at\` (set by PostgreSQL inside the creating transaction, so slightly before commit) from its receipt time. Machine CPU is the busy share of every core (/proc/stat) over the measured posts, api, worker, PostgreSQL, Redis, sink and load generator together: a p99 taken on a saturated machine is queueing, so choose capacity from the curve. The p99 goal holds only at ${settings.latencyRate} posts/s achieved: below 95 % of it, the figure is marked invalid.`,
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

/** What one latency run measured (see {@link measureLatency}). */
export interface Latency {
  askedRate: number;
  /** Cores' worth of the whole machine's CPU busy during the measured posts. */
  machineCores: number;
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

/**
 * Post commit to receipt: starts a sink, a worker and api layout b (of `build`) on `db`,
 * creates posts at `rate` for the run's latency duration after a warm-up, and reads the
 * latencies the sink measured, with the machine's CPU and the services' peak RSS meanwhile.
 *
 * @param mode - `paced`: open loop, post i at i / rate; `burst`: autocannon's overallRate
 */
export async function measureLatency(
  scope: Scope,
  settings: BenchSettings,
  db: BenchDatabase,
  redisPrefix: string,
  mode: 'paced' | 'burst',
  rate: number,
  build: Build = THIS_BUILD,
): Promise<Latency> {
  const secret = newSecret();
  const sink = await startSink(scope, settings, { secret, latency: true });
  const endpointId = await subscribeOnly(db, `${sink.url}/webhooks/posts`, secret);
  const worker = await startWorker(scope, settings, db.url, redisPrefix, 'webhook-worker-latency', settings.workerConcurrency, {}, build);
  const api = await startApi(scope, settings, db.url, redisPrefix, 'b', build);
  const options = {
    url: api.url,
    // Enough connections that the client never caps the rate: each sends about 4 requests a second.
    connections: Math.max(32, Math.ceil(settings.latencyRate / 4)),
    overallRate: rate,
    headers: { authorization: `Bearer ${db.token}`, user_id: String(db.userId), 'content-type': 'application/json' },
    requests: [{ method: 'POST', path: '/api/v1/posts', body: JSON.stringify({ title: 'Latency post', content: 'Created at a fixed rate.' }) }],
  };
  const load = async (amount: number): Promise<{ ok: number; durationS: number }> => {
    if (mode === 'burst') {
      const result = await autocannon({ ...options, amount });
      return { ok: result['2xx'], durationS: result.duration };
    }
    const request = { method: 'POST', url: `${api.url}${options.requests[0].path}`, headers: options.headers, body: options.requests[0].body };
    return pacedLoad(request, rate, amount);
  };
  // Layout B answers HTTP 200 even when an insert fails, so the outbox rows tell how many events to expect.
  await load(Math.ceil(rate * settings.apiWarmupS));
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
  const busyBefore = readMachineCpu();
  let busyAfter: MachineCpu;
  try {
    result = await load(Math.ceil(rate * settings.latencyDurationS));
    busyAfter = readMachineCpu();
    expected = (await countDeliveries(db, endpointId)) - before;
    stats = await waitForReceipts(sink, expected);
  } finally {
    clearInterval(sampler);
  }
  const problem =
    expected === 0 || stats.latency.count < result.ok
      ? `${formatNumber(result.ok)} posts answered 2xx, ${formatNumber(expected)} events recorded, ${formatNumber(stats.latency.count)} received`
      : undefined;
  const machineCores = ((busyAfter.busy - busyBefore.busy) / Math.max(1, busyAfter.total - busyBefore.total)) * availableParallelism();
  return { ...stats.latency, askedRate: rate, machineCores, rate: result.ok / result.durationS, problem, peakRssBytes };
}

/** Jiffies of the whole machine since boot: all, and busy (all but idle and iowait), from the `cpu` line of /proc/stat. */
interface MachineCpu {
  total: number;
  busy: number;
}

function readMachineCpu(): MachineCpu {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1, 9).map(Number);
  const total = fields.reduce((sum, value) => sum + value, 0);
  return { total, busy: total - fields[3] - fields[4] };
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
