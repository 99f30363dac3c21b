import { randomBytes } from 'node:crypto';
import { createBenchDatabase, createBenchRedisPrefix, withClient } from './lib/bench-database';
import { deliverThroughOurWorker, describeMeasurement, measureWorkers, subscribeOnly } from './lib/delivery-run';
import { readStatements, statementsPerDelivery } from './lib/pg-statements';
import { Scope } from './lib/scope';
import { startSink, startWorker } from './lib/services';
import { loadBenchSettings } from './lib/settings';

/**
 * What our worker alone costs PostgreSQL per webhook at full concurrency: the delivery
 * section's run (rows written as the outbox writes them, jobs added, one worker at
 * BENCH_WORKER_CONCURRENCY against the sink), with pg_stat_statements read around it. Prints
 * the run's figures and each statement's calls per webhook and execution time.
 *
 * Usage: `node dist/bench/worker-statements.js [webhooks, default 5000]`
 */
async function main(): Promise<void> {
  const settings = loadBenchSettings();
  const events = Number(process.argv[2] ?? 5_000);
  const scope = new Scope();
  try {
    const db = await createBenchDatabase(scope, settings.databaseUrl);
    const prefix = createBenchRedisPrefix(scope, settings.redisUrl);
    const secret = `whsec_${randomBytes(32).toString('base64')}`;
    const sink = await startSink(scope, settings, { secret });
    const endpointId = await subscribeOnly(db, `${sink.url}/webhooks/posts`, secret);
    const worker = await startWorker(scope, settings, db.url, `${prefix}_w`, 'webhook-worker');
    await deliverThroughOurWorker(settings, db, `${prefix}_w`, sink, endpointId, Math.ceil(events / 5));
    const before = await withClient(db.url, readStatements);
    const measured = await measureWorkers([worker], () => deliverThroughOurWorker(settings, db, `${prefix}_w`, sink, endpointId, events));
    const after = await withClient(db.url, readStatements);
    process.stdout.write(`${measured.run.perSecond.toFixed(0)} webhooks/s (${describeMeasurement(measured)})\n`);
    for (const line of statementsPerDelivery(before, after, events, 0.005)) process.stdout.write(`  ${line}\n`);
  } finally {
    await scope.close();
  }
}

void main();
