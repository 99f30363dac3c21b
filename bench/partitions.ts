import { randomBytes } from 'node:crypto';
import { createBenchDatabase, createBenchRedisPrefix, withClient } from './lib/bench-database';
import { deliverThroughOurWorker, describeMeasurement, measureWorkers, subscribeOnly } from './lib/delivery-run';
import { formatNumber, formatSection, Section } from './lib/report';
import { Scope, withScope } from './lib/scope';
import { startSink, startWorker } from './lib/services';
import { BenchSettings, loadBenchSettings } from './lib/settings';
import { median, roundRatios, takeTurns } from './lib/turns';

/** Partitions of the partitioned contender: the count docs/design.md §13.1's cluster promise uses. */
const PARTITIONS = 12;
/** Endpoints the deliveries go to in turn (all at the one sink), so every partition has work. */
const ENDPOINTS = 24;

/**
 * docs/design.md §13.1: partitions must not cost throughput on a single Redis. The same
 * webhooks (to 24 endpoints at one sink) delivered end to end through one worker with
 * WEBHOOK_QUEUE_PARTITIONS=1 and through one with 12, taking turns round by round.
 */
export async function runPartitionsBench(settings: BenchSettings): Promise<Section> {
  const scope = new Scope();
  try {
    const redisPrefix = createBenchRedisPrefix(scope, settings.redisUrl);
    const secret = `whsec_${randomBytes(32).toString('base64')}`;
    const sink = await startSink(scope, settings, { secret });
    const url = `${sink.url}/webhooks/posts`;
    const counts = [1, PARTITIONS];
    // A database per contender: a worker's outbox relay re-adds pending rows it finds without
    // a job in its own queue, so on a shared database each would also deliver the other's.
    const setups = await Promise.all(
      counts.map(async () => {
        const db = await createBenchDatabase(scope, settings.databaseUrl);
        const endpoints = [await subscribeOnly(db, url, secret)];
        await withClient(db.url, async (client) => {
          for (let i = 1; i < ENDPOINTS; i += 1) {
            endpoints.push((await client.query<{ id: number }>('INSERT INTO webhook_endpoints (url, secret) VALUES ($1, $2) RETURNING id', [url, secret])).rows[0].id);
          }
        });
        return { db, endpoints };
      }),
    );
    const perRound = Math.max(1, Math.round(settings.events / settings.rounds));
    const warmup = Math.min(1_000, Math.ceil(perRound / 4));

    const [one, many] = await withScope(async (inner) => {
      const workers = await Promise.all(
        counts.map(async (count, i) =>
          startWorker(inner, settings, setups[i].db.url, `${redisPrefix}_p${count}`, `webhook-worker-p${count}`, settings.workerConcurrency, {
            WEBHOOK_QUEUE_PARTITIONS: String(count),
          }),
        ),
      );
      const contenders = counts.map((count, i) => ({
        name: `${count} partitions`,
        run: (events: number) =>
          measureWorkers([workers[i]], () => deliverThroughOurWorker(settings, setups[i].db, `${redisPrefix}_p${count}`, sink, setups[i].endpoints, events, count)),
      }));
      for (const contender of contenders) await contender.run(warmup);
      return takeTurns(
        settings.rounds,
        contenders.map((contender) => ({ name: contender.name, run: () => contender.run(perRound) })),
      );
    });
    const throughput = (runs: typeof one) => median(runs.map((m) => m.run.perSecond));
    const incomplete = many.filter((m) => m.run.succeeded !== m.run.events);
    return {
      title: `Partitioned queue (${formatNumber(settings.events)} webhooks to ${ENDPOINTS} endpoints per contender in ${settings.rounds} rounds, one Redis, worker concurrency ${settings.workerConcurrency})`,
      figures: [
        {
          name: `delivery throughput with ${PARTITIONS} partitions on one Redis`,
          unit: 'webhooks/s',
          ours: throughput(many),
          problem:
            incomplete.length === 0
              ? undefined
              : `${formatNumber(incomplete[0].run.succeeded ?? 0)} of ${formatNumber(incomplete[0].run.events)} recorded as succeeded in a round`,
          oursDetail: describeMeasurement(many[many.length - 1]),
          baseline: { name: '1 partition (the unpartitioned queue)', value: throughput(one) },
          baselineDetail: describeMeasurement(one[one.length - 1]),
          ratios: roundRatios(
            many.map((m) => m.run.perSecond),
            one.map((m) => m.run.perSecond),
          ),
          goal: 0.9,
        },
      ],
      notes: [
        `Each partition is a BullMQ queue with its own blocking connection in the worker; deliveries go to the ${ENDPOINTS} endpoints in turn, so all ${PARTITIONS} partitions have work.`,
      ],
    };
  } finally {
    await scope.close();
  }
}

if (require.main === module) {
  runPartitionsBench(loadBenchSettings()).then(
    (section) => process.stdout.write(formatSection(section)),
    (error: unknown) => {
      process.stderr.write(`${String(error)}\n`);
      process.exitCode = 1;
    },
  );
}
