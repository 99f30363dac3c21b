import { randomBytes } from 'node:crypto';
import { BenchDatabase, createBenchDatabase, createBenchRedisPrefix } from './lib/bench-database';
import { Child } from './lib/children';
import { deliverThroughOurWorker, describeMeasurement, measureWorkers, subscribeOnly, WorkerMeasurement } from './lib/delivery-run';
import { Figure, formatNumber, formatSection, Section } from './lib/report';
import { Scope, withScope } from './lib/scope';
import { Sink, startSink, startWorker } from './lib/services';
import { BenchSettings, loadBenchSettings } from './lib/settings';

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
    const db = await createBenchDatabase(scope, settings.databaseUrl);
    const redisPrefix = createBenchRedisPrefix(scope, settings.redisUrl);
    const secret = `whsec_${randomBytes(32).toString('base64')}`;
    const sink = await startSink(scope, settings, { secret, delayMs: settings.scalingDelayMs });
    const endpointId = await subscribeOnly(db, `${sink.url}/webhooks/posts`, secret);
    const rig: Rig = { settings, db, sink, endpointId, redisPrefix };

    const figures: Figure[] = [];
    for (const [concurrency, events] of [
      [settings.workerConcurrency, settings.scalingEvents],
      [settings.scalingLowConcurrency, settings.scalingLowEvents],
    ]) {
      const one = await runWith(rig, 1, concurrency, events);
      const two = await runWith(rig, 2, concurrency, events);
      const incomplete = [one, two].some((m) => m.run.succeeded !== m.run.events);
      figures.push({
        name: `2 worker processes vs 1, concurrency ${concurrency} each, ${formatNumber(events)} webhooks`,
        unit: 'webhooks/s',
        ours: two.run.perSecond,
        problem: incomplete ? `recorded as succeeded: ${one.run.succeeded} and ${two.run.succeeded} of ${events}` : undefined,
        oursDetail: describeMeasurement(two),
        baseline: { name: '1 worker process', value: one.run.perSecond },
        baselineDetail: describeMeasurement(one),
        goal: 1.8,
      });
    }
    return {
      title: `Scaling (receiver answers after ${settings.scalingDelayMs} ms)`,
      figures,
      notes: [
        'Each run is the delivery run of the Delivery section (warm-up batch first), against a sink that waits before answering.',
        `At concurrency ${settings.scalingLowConcurrency} one worker can have at most ${settings.scalingLowConcurrency} webhooks in flight, so it is bounded by the endpoint at about ${Math.round((settings.scalingLowConcurrency * 1000) / settings.scalingDelayMs)}/s; a second process should double that when CPU is not the limit.`,
      ],
    };
  } finally {
    await scope.close();
  }
}

interface Rig {
  settings: BenchSettings;
  db: BenchDatabase;
  sink: Sink;
  endpointId: number;
  redisPrefix: string;
}

async function runWith(rig: Rig, workers: number, concurrency: number, events: number): Promise<WorkerMeasurement> {
  const { settings, db, sink, endpointId } = rig;
  const prefix = `${rig.redisPrefix}_c${concurrency}w${workers}`;
  return withScope(async (scope) => {
    const started: Child[] = [];
    for (let i = 1; i <= workers; i += 1) {
      started.push(await startWorker(scope, settings, db.url, prefix, `webhook-worker-c${concurrency}-${i}of${workers}`, concurrency));
    }
    return measureWorkers(
      started,
      () => deliverThroughOurWorker(settings, db, prefix, sink, endpointId, Math.min(1_000, Math.ceil(events / 10)), tag()),
      () => deliverThroughOurWorker(settings, db, prefix, sink, endpointId, events, tag()),
    );
  });
}

function tag(): string {
  return `s${randomBytes(4).toString('hex')}`;
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
