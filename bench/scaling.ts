import { randomBytes } from 'node:crypto';
import { BenchDatabase, createBenchDatabase, createBenchRedisPrefix } from './lib/bench-database';
import { Child } from './lib/children';
import { deliverThroughOurWorker, describeMeasurement, measureWorkers, subscribeOnly, WorkerMeasurement } from './lib/delivery-run';
import { Figure, formatNumber, formatSection, Section } from './lib/report';
import { Scope, withScope } from './lib/scope';
import { Sink, startSink, startWorker } from './lib/services';
import { BenchSettings, loadBenchSettings } from './lib/settings';
import { median, roundRatios, takeTurns } from './lib/turns';

/**
 * The delivery run of bench/delivery.ts with one and then two worker processes, against a
 * sink that answers after a fixed delay (20 ms by default). Twice: at the run's worker
 * concurrency (the setup), and at a low concurrency where waiting on the endpoint,
 * not CPU, bounds one worker, which shows whether a second process adds throughput when
 * there are cores to spare.
 */
export async function runScalingBench(settings: BenchSettings): Promise<Section> {
  const scope = new Scope();
  try {
    const redisPrefix = createBenchRedisPrefix(scope, settings.redisUrl);
    const secret = `whsec_${randomBytes(32).toString('base64')}`;
    const sink = await startSink(scope, settings, { secret, delayMs: settings.scalingDelayMs });
    const rig: Rig = { settings, sink, secret, redisPrefix };

    const figures: Figure[] = [];
    for (const [concurrency, events] of [
      [settings.workerConcurrency, settings.scalingEvents],
      [settings.scalingLowConcurrency, settings.scalingLowEvents],
    ]) {
      const [two, one] = await withScope(async (scope) => {
        const setups = [await startWorkers(scope, rig, 2, concurrency), await startWorkers(scope, rig, 1, concurrency)];
        const perRound = Math.max(1, Math.round(events / settings.rounds));
        const run = (setup: WorkerSet, count: number) =>
          measureWorkers(setup.workers, () => deliverThroughOurWorker(settings, setup.db, setup.prefix, sink, setup.endpointId, count));
        for (const setup of setups) await run(setup, Math.min(1_000, Math.ceil(perRound / 4)));
        return takeTurns(
          settings.rounds,
          setups.map((setup) => ({ name: `${setup.workers.length} workers`, run: () => run(setup, perRound) })),
        );
      });
      const incomplete = [...one, ...two].some((m) => m.run.succeeded !== m.run.events);
      const throughput = (runs: readonly WorkerMeasurement[]) => median(runs.map((m) => m.run.perSecond));
      figures.push({
        name: `2 worker processes vs 1, concurrency ${concurrency} each, ${formatNumber(events)} webhooks in ${settings.rounds} rounds`,
        unit: 'webhooks/s',
        ours: throughput(two),
        problem: incomplete ? 'a round recorded fewer succeeded deliveries than it sent' : undefined,
        oursDetail: describeMeasurement(two[two.length - 1]),
        baseline: { name: '1 worker process', value: throughput(one) },
        baselineDetail: describeMeasurement(one[one.length - 1]),
        ratios: roundRatios(
          two.map((m) => m.run.perSecond),
          one.map((m) => m.run.perSecond),
        ),
        goal: 1.8,
      });
    }
    return {
      title: `Scaling (receiver answers after ${settings.scalingDelayMs} ms)`,
      figures,
      notes: [
        `Each run is the delivery run of the Delivery section, against a sink that waits before answering. The two setups run side by side on their own queues; after a warm-up batch each they take turns, ${settings.rounds} rounds (order reversed every other round); the ratio is the median of the per-round ratios with their min-max.`,
        `At concurrency ${settings.scalingLowConcurrency} one worker can have at most ${settings.scalingLowConcurrency} webhooks in flight, so it is bounded by the endpoint at about ${Math.round((settings.scalingLowConcurrency * 1000) / settings.scalingDelayMs)}/s; a second process should double that when CPU is not the limit.`,
      ],
    };
  } finally {
    await scope.close();
  }
}

interface Rig {
  settings: BenchSettings;
  sink: Sink;
  secret: string;
  redisPrefix: string;
}

/**
 * The worker processes of one setup, all on one queue under `prefix`, with a database of its
 * own: a worker's outbox relay re-adds pending rows it finds without a job in its own queue,
 * so on a shared database each setup would also deliver the other's.
 */
interface WorkerSet {
  prefix: string;
  workers: Child[];
  db: BenchDatabase;
  endpointId: number;
}

async function startWorkers(scope: Scope, rig: Rig, workers: number, concurrency: number): Promise<WorkerSet> {
  const prefix = `${rig.redisPrefix}_c${concurrency}w${workers}`;
  const db = await createBenchDatabase(scope, rig.settings.databaseUrl);
  const endpointId = await subscribeOnly(db, `${rig.sink.url}/webhooks/posts`, rig.secret);
  const started: Child[] = [];
  for (let i = 1; i <= workers; i += 1) {
    started.push(await startWorker(scope, rig.settings, db.url, prefix, `webhook-worker-c${concurrency}-${i}of${workers}`, concurrency));
  }
  return { prefix, workers: started, db, endpointId };
}

if (require.main === module) {
  runScalingBench(loadBenchSettings()).then(
    (section) => process.stdout.write(formatSection(section)),
    (error: unknown) => {
      process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
      process.exitCode = 1;
    },
  );
}
