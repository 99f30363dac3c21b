import { ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { Redis } from 'ioredis';
import { BenchDatabase, createBenchDatabase, withClient } from './lib/bench-database';
import { readCpuSeconds, sleep } from './lib/children';
import { subscribeOnly, waitForReceipts } from './lib/delivery-run';
import { freePort } from './lib/net';
import { pacedLoad } from './lib/paced-load';
import { readStatements, StatementSnapshot, statementsPerDelivery } from './lib/pg-statements';
import { Figure, formatNumber, formatSection, Section } from './lib/report';
import { Scope } from './lib/scope';
import { startApi, startSink, startWorker } from './lib/services';
import { BenchSettings, loadBenchSettings } from './lib/settings';

/** What the whole path of one delivery costs, each figure per delivery. */
export interface DeliveryCost {
  deliveries: number;
  redisCommands: number;
  /** The commands that make up most of `redisCommands`, per delivery, most first. */
  redisTopCommands: [name: string, perDelivery: number][];
  redisCpuMs: number;
  pgTransactions: number;
  pgRowsInserted: number;
  pgRowsUpdated: number;
  /** Growth of every table of the schema (heap, TOAST and indexes), bytes. */
  pgBytes: number;
  pgBackendCpuMs: number;
  workerCpuMs: number;
  apiCpuMs: number;
  /** pg_stat_statements of the run, per delivery (empty when the server does not load it). */
  pgStatements: string[];
}

/**
 * The cost of one delivery end to end, measured rather than estimated: posts are created
 * through api layout b at a steady rate with one endpoint subscribed, one worker delivers
 * them to the sink, and the run reads, before and after, a Redis server of its own (INFO
 * commandstats and cpu: every command of the run, nothing of anyone else's), the database's
 * own counters (pg_stat_database, table sizes) and the CPU time of the PostgreSQL backends
 * serving it, the api and the worker (/proc). docs/capacity.md derives from these figures
 * what a given rate needs.
 */
export async function runCapacityBench(settings: BenchSettings): Promise<Section> {
  const scope = new Scope();
  try {
    const redisPort = await freePort();
    await startPrivateRedis(scope, redisPort);
    const local: BenchSettings = { ...settings, redisUrl: `redis://127.0.0.1:${redisPort}` };
    const db = await createBenchDatabase(scope, settings.databaseUrl);
    const secret = `whsec_${randomBytes(32).toString('base64')}`;
    const sink = await startSink(scope, local, { secret });
    await subscribeOnly(db, `${sink.url}/webhooks/posts`, secret);
    const prefix = `pwcap${randomBytes(3).toString('hex')}`;
    const worker = await startWorker(scope, local, db.url, prefix, 'webhook-worker-capacity');
    const api = await startApi(scope, local, db.url, prefix, 'b');
    const redis = new Redis(redisPort, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 1 });
    scope.add('capacity redis client', async () => void redis.disconnect());
    await redis.connect();

    const rate = settings.capacityRate;
    const posts = Math.ceil(rate * settings.latencyDurationS);
    const request = {
      method: 'POST',
      url: `${api.url}/api/v1/posts`,
      headers: { authorization: `Bearer ${db.token}`, user_id: String(db.userId), 'content-type': 'application/json' },
      body: JSON.stringify({ title: 'Capacity post', content: 'Lorem ipsum dolor sit amet, consectetur adipiscing elit. '.repeat(5).trim() }),
    };
    const warmup = Math.ceil(rate * settings.apiWarmupS);
    await pacedLoad(request, rate, warmup);
    await waitForReceipts(sink, warmup);
    await settle(db, warmup);
    await sink.reset();

    const before = await snapshot(redis, db);
    const processes = { worker: worker.cpuSeconds(), api: api.child.cpuSeconds() };
    const result = await pacedLoad(request, rate, posts);
    await waitForReceipts(sink, result.ok);
    await settle(db, warmup + result.ok);
    const after = await snapshot(redis, db);
    const cost = perDelivery(result.ok, before, after, {
      worker: worker.cpuSeconds() - processes.worker,
      api: api.child.cpuSeconds() - processes.api,
    });
    return capacitySection(settings, rate, cost);
  } finally {
    await scope.close();
  }
}

/** A redis-server without persistence on `port`, stopped when the scope closes. */
export async function startPrivateRedis(scope: Scope, port: number): Promise<ChildProcess> {
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  scope.add('capacity redis-server', async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await once(child, 'exit');
    }
  });
  const probe = new Redis(port, '127.0.0.1', { lazyConnect: true, retryStrategy: () => 50, maxRetriesPerRequest: null });
  probe.on('error', () => undefined);
  try {
    await probe.connect().catch(() => undefined);
    await probe.ping();
  } finally {
    probe.disconnect();
  }
  return child;
}

/** Waits until every delivery of the run is recorded as succeeded, and PostgreSQL has published its counters. */
async function settle(db: BenchDatabase, deliveries: number): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const done = await withClient(db.url, async (client) =>
      Number((await client.query(`SELECT count(*) AS n FROM webhook_deliveries WHERE status = 'succeeded'`)).rows[0].n),
    );
    if (done >= deliveries) break;
    await sleep(100);
  }
  // Backends publish their statistics at most once a second (PostgreSQL 15, PGSTAT_MIN_INTERVAL).
  await sleep(1_500);
}

interface Snapshot {
  commands: Map<string, number>;
  redisCpuS: number;
  transactions: number;
  inserted: number;
  updated: number;
  bytes: number;
  /** CPU seconds of each backend serving the run's database, by pid. */
  backends: Map<number, number>;
  statements: StatementSnapshot;
}

async function snapshot(redis: Redis, db: BenchDatabase): Promise<Snapshot> {
  const commands = new Map<string, number>();
  for (const line of (await redis.info('commandstats')).split('\r\n')) {
    const match = /^cmdstat_([^:]+):calls=(\d+)/.exec(line);
    if (match) commands.set(match[1], Number(match[2]));
  }
  const cpu = await redis.info('cpu');
  const field = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(cpu)?.[1] ?? 0);
  return withClient(db.url, async (client) => {
    await client.query('SELECT pg_stat_clear_snapshot()');
    const statements = await readStatements(client);
    const stats = (
      await client.query<{ transactions: string; inserted: string; updated: string }>(
        `SELECT xact_commit + xact_rollback AS transactions, tup_inserted AS inserted, tup_updated AS updated
           FROM pg_stat_database WHERE datname = current_database()`,
      )
    ).rows[0];
    const bytes = (
      await client.query<{ bytes: string }>(
        `SELECT COALESCE(sum(pg_total_relation_size(c.oid)), 0) AS bytes
           FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = 'public' AND c.relkind = 'r'`,
      )
    ).rows[0];
    const pids = (
      await client.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)
    ).rows;
    return {
      commands,
      redisCpuS: field('used_cpu_sys') + field('used_cpu_user'),
      transactions: Number(stats.transactions),
      inserted: Number(stats.inserted),
      updated: Number(stats.updated),
      bytes: Number(bytes.bytes),
      backends: new Map(pids.map(({ pid }) => [pid, readCpuSeconds(pid)])),
      statements,
    };
  });
}

/**
 * The difference of two snapshots, per delivery. The snapshots' own queries (a handful of
 * statements) are left in: against thousands of deliveries they are noise.
 */
export function perDelivery(deliveries: number, before: Snapshot, after: Snapshot, cpuS: { worker: number; api: number }): DeliveryCost {
  const per = (value: number) => value / deliveries;
  const commandDeltas = [...after.commands].map(([name, calls]): [string, number] => [name, per(calls - (before.commands.get(name) ?? 0))]);
  const redisCommands = commandDeltas.reduce((sum, [, value]) => sum + value, 0);
  let backendCpuS = 0;
  for (const [pid, seconds] of after.backends) backendCpuS += seconds - (before.backends.get(pid) ?? 0);
  return {
    deliveries,
    redisCommands,
    redisTopCommands: commandDeltas.filter(([, value]) => value >= 0.05).sort((a, b) => b[1] - a[1]),
    redisCpuMs: per((after.redisCpuS - before.redisCpuS) * 1000),
    pgTransactions: per(after.transactions - before.transactions),
    pgRowsInserted: per(after.inserted - before.inserted),
    pgRowsUpdated: per(after.updated - before.updated),
    pgBytes: per(after.bytes - before.bytes),
    pgBackendCpuMs: per(backendCpuS * 1000),
    workerCpuMs: per(cpuS.worker * 1000),
    apiCpuMs: per(cpuS.api * 1000),
    pgStatements: statementsPerDelivery(before.statements, after.statements, deliveries),
  };
}

function capacitySection(settings: BenchSettings, rate: number, cost: DeliveryCost): Section {
  const perCore = (ms: number) => (ms > 0 ? 1000 / ms : Number.POSITIVE_INFINITY);
  /** `below`: issue 29's goal for the figure, in its unit. */
  const figure = (name: string, unit: string, value: number, detail?: string, below?: number): Figure => ({ name, unit, ours: value, oursDetail: detail, below });
  const top = cost.redisTopCommands.map(([name, value]) => `${name} ${value.toFixed(2)}`).join(', ');
  return {
    title: `Capacity: the cost of one delivery end to end (${formatNumber(cost.deliveries)} posts at ${formatNumber(rate)}/s, one endpoint, one worker)`,
    figures: [
      figure('Redis commands per delivery', 'commands', cost.redisCommands, top, 45),
      figure('Redis CPU per delivery', 'ms', cost.redisCpuMs, `one Redis core carries about ${formatNumber(perCore(cost.redisCpuMs))} deliveries/s`, 0.35),
      figure('PostgreSQL transactions per delivery (api and worker)', 'transactions', cost.pgTransactions, undefined, 2.5),
      figure('PostgreSQL rows written per delivery', 'rows', cost.pgRowsInserted + cost.pgRowsUpdated, `${cost.pgRowsInserted.toFixed(2)} inserted, ${cost.pgRowsUpdated.toFixed(2)} updated`),
      figure('PostgreSQL bytes stored per delivery (post, event, delivery, attempt, indexes)', 'B', cost.pgBytes),
      figure(
        'PostgreSQL backend CPU per delivery',
        'ms',
        cost.pgBackendCpuMs,
        `one PostgreSQL core carries about ${formatNumber(perCore(cost.pgBackendCpuMs))} deliveries/s (backends only)`,
        1.5,
      ),
      figure('worker CPU per delivery', 'ms', cost.workerCpuMs, `one worker core carries about ${formatNumber(perCore(cost.workerCpuMs))} deliveries/s`, 1.2),
      figure('api CPU per post (create, outbox, enqueue)', 'ms', cost.apiCpuMs, `one api core carries about ${formatNumber(perCore(cost.apiCpuMs))} posts/s`, 1.0),
    ],
    notes: [
      `Posts are created through api layout b, open loop at ${formatNumber(rate)}/s (\`BENCH_CAPACITY_RATE\`) for ${settings.latencyDurationS} s after a ${settings.apiWarmupS} s warm-up, one endpoint subscribed, so one post is one delivery. A Redis server of the run's own counts every command (INFO commandstats) and its CPU (INFO cpu); PostgreSQL's figures are the run database's own counters (pg_stat_database, pg_total_relation_size of every table) and the CPU of the backends serving it (/proc), without the server's background processes (WAL writer, checkpointer, autovacuum).`,
      ...(cost.pgStatements.length > 0 ? [`PostgreSQL statements per delivery (pg_stat_statements, calls × execution time): ${cost.pgStatements.map((line) => `\`${line}\``).join('; ')}`] : []),
      'A rate well below saturation keeps queueing out of the figures; batching (group commit, the gate\'s batched scripts) makes them smaller still at higher rates. docs/capacity.md turns them into masters, workers and PostgreSQL cores for a given rate.',
    ],
  };
}

if (require.main === module) {
  runCapacityBench(loadBenchSettings()).then(
    (section) => process.stdout.write(formatSection(section)),
    (error: unknown) => {
      process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
      process.exitCode = 1;
    },
  );
}
