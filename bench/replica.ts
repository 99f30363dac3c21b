import { createHash, randomBytes } from 'node:crypto';
import type { Client } from 'pg';
import { BackendCpu, withApplicationName } from './lib/backend-cpu';
import { BenchDatabase, createBenchDatabase, createBenchRedisPrefix, withClient } from './lib/bench-database';
import { sleep, THIS_BUILD } from './lib/children';
import { Dashboard, endpointHealthPath, repeatRoute, startDashboardReader, VIEW_ROUTES, ViewRoute } from './lib/dashboard-reader';
import { subscribeOnly, waitForReceipts } from './lib/delivery-run';
import { PacedRequest, pacedLoad } from './lib/paced-load';
import { Figure, formatNumber, formatSection, Section } from './lib/report';
import { Scope } from './lib/scope';
import { Sink, startApi, startSink, startWorker } from './lib/services';
import { BenchSettings, loadBenchSettings } from './lib/settings';
import { median, roundRatios, takeTurns } from './lib/turns';

/** application_name of each pool whose backends the section tells apart. */
const POOLS = { api: 'bench-api', lists: 'bench-list-reader', worker: 'bench-worker' } as const;
/** Seconds each route is read on its own, one request after the other, to price one request. */
const ROUTE_SECONDS = 3;
/** Rows of history written per statement. */
const HISTORY_CHUNK = 50_000;

/** One turn of the load: posts through the api, delivered by the worker, with or without the dashboards reading. */
interface Phase {
  seconds: number;
  deliveries: number;
  /** Backend CPU of the posts and their deliveries (the api's primary pool and the worker), seconds. */
  writesCpuS: number;
  /** Backend CPU of the list reader's pool: what a replica would serve, seconds. */
  readsCpuS: number;
  views: number;
  requests: number;
  failed: number;
}

/** What one route's reads cost PostgreSQL, per request. */
interface RouteCost {
  route: ViewRoute;
  /** On the list reader's pool (the replica), ms. */
  readsMs: number;
  /** Left on the primary (the api's other pool), ms. */
  primaryMs: number;
}

/**
 * What a read replica takes off the primary (docs/design.md §13.3), measured: the capacity section's load
 * (posts through api layout b at BENCH_CAPACITY_RATE, one endpoint, one worker) while
 * operators' dashboards read the operations API. The api runs with DATABASE_REPLICA_URL naming
 * the same database under another application_name, so the reads a replica would serve run
 * on backends of their own, and the run reads the CPU of each pool's backends (/proc) over the
 * same window. The load runs with and without the dashboards, taking turns; then each read of
 * a view is priced alone, before and after BENCH_REPLICA_HISTORY attempts are written over the
 * last 24 hours, since the health and stats reads scan that window.
 */
export async function runReplicaBench(settings: BenchSettings): Promise<Section> {
  const scope = new Scope();
  try {
    const db = await createBenchDatabase(scope, settings.databaseUrl);
    const secret = `whsec_${randomBytes(32).toString('base64')}`;
    const sink = await startSink(scope, settings, { secret });
    const endpointId = await subscribeOnly(db, `${sink.url}/webhooks/posts`, secret);
    const prefix = createBenchRedisPrefix(scope, settings.redisUrl);
    await startWorker(scope, settings, withApplicationName(db.url, POOLS.worker), prefix, 'webhook-worker-replica');
    const api = await startApi(scope, settings, withApplicationName(db.url, POOLS.api), prefix, 'b', THIS_BUILD, {
      DATABASE_REPLICA_URL: withApplicationName(db.url, POOLS.lists),
    });
    const dashboard: Dashboard = { apiUrl: api.url, key: await createReadKey(db) };
    const request: PacedRequest = {
      method: 'POST',
      url: `${api.url}/api/v1/posts`,
      headers: { authorization: `Bearer ${db.token}`, user_id: String(db.userId), 'content-type': 'application/json' },
      body: JSON.stringify({ title: 'Replica post', content: 'Lorem ipsum dolor sit amet, consectetur adipiscing elit. '.repeat(5).trim() }),
    };
    const rate = settings.capacityRate;
    const posts = Math.ceil(rate * settings.latencyDurationS);
    // Deliveries recorded so far, the history's included: each phase waits for its own on top.
    let delivered = 0;
    const phase = async (viewsPerS: number, count = posts): Promise<Phase> => {
      const measured = await loadPhase(db, sink, dashboard, request, rate, count, viewsPerS, delivered);
      delivered += measured.deliveries;
      return measured;
    };

    // Warm-up, unmeasured: the pools open and the api's code paths are compiled, both kinds of reads included.
    await phase(settings.replicaViewsPerS, Math.ceil(rate * settings.apiWarmupS));
    const small = { attempts: await attemptsIn24h(db), costs: await routeCosts(db, dashboard, endpointId) };
    await writeHistory(db, endpointId, settings.replicaHistory);
    delivered += settings.replicaHistory;
    const [alone, read] = await takeTurns(settings.rounds, [
      { name: 'posts alone', run: () => phase(0) },
      { name: 'posts and dashboards', run: () => phase(settings.replicaViewsPerS) },
    ]);
    const large = { attempts: await attemptsIn24h(db), costs: await routeCosts(db, dashboard, endpointId) };
    return replicaSection(settings, posts, alone, read, small, large);
  } finally {
    await scope.close();
  }
}

/**
 * A service key allowed to read what the dashboard shows (`endpoints:read`, `webhooks:read`):
 * an operator's, so its reads are never sent to the primary for a write of its own.
 */
async function createReadKey(db: BenchDatabase): Promise<string> {
  const key = `sk_${randomBytes(32).toString('base64url')}`;
  await withClient(db.url, (client) =>
    client.query(`INSERT INTO service_keys (name, key_hash, scopes) VALUES ('bench dashboard', $1, $2)`, [
      createHash('sha256').update(key).digest('hex'),
      ['endpoints:read', 'webhooks:read'],
    ]),
  );
  return key;
}

/**
 * Posts `posts` at `rate` and waits until each is delivered and recorded, while `viewsPerS`
 * dashboard views a second are opened (none at 0), reading each pool's backend CPU over
 * that whole window.
 *
 * @param deliveredBefore - deliveries the run recorded before this phase
 * @throws Error when a post fails or the deliveries stall
 */
async function loadPhase(
  db: BenchDatabase,
  sink: Sink,
  dashboard: Dashboard,
  request: PacedRequest,
  rate: number,
  posts: number,
  viewsPerS: number,
  deliveredBefore: number,
): Promise<Phase> {
  await sink.reset();
  const cpu = await BackendCpu.start(db.url, Object.values(POOLS));
  const started = performance.now();
  const reader = viewsPerS > 0 ? startDashboardReader(dashboard, viewsPerS) : undefined;
  const load = await pacedLoad(request, rate, posts);
  if (load.failed > 0) throw new Error(`${load.failed} of ${posts} posts failed`);
  await waitForReceipts(sink, load.ok);
  await waitForRecorded(db, deliveredBefore + load.ok);
  const reads = (await reader?.stop()) ?? { views: 0, requests: 0, failed: 0 };
  const seconds = (performance.now() - started) / 1000;
  const used = await cpu.stop();
  return {
    seconds,
    deliveries: load.ok,
    writesCpuS: used.get(POOLS.api)! + used.get(POOLS.worker)!,
    readsCpuS: used.get(POOLS.lists)!,
    ...reads,
  };
}

/** Waits until `deliveries` deliveries are recorded as succeeded. */
async function waitForRecorded(db: BenchDatabase, deliveries: number): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const done = await withClient(db.url, async (client) =>
      Number((await client.query(`SELECT count(*) AS n FROM webhook_deliveries WHERE status = 'succeeded'`)).rows[0].n),
    );
    if (done >= deliveries) return;
    await sleep(100);
  }
  throw new Error(`deliveries not recorded within 60 s: expected ${deliveries}`);
}

/** Each read of a view, sent alone for ROUTE_SECONDS, priced by the backend CPU of each pool. */
async function routeCosts(db: BenchDatabase, dashboard: Dashboard, endpointId: number): Promise<RouteCost[]> {
  const costs: RouteCost[] = [];
  for (const route of Object.keys(VIEW_ROUTES) as ViewRoute[]) {
    const path = route === 'endpointHealth' ? endpointHealthPath(endpointId) : VIEW_ROUTES[route];
    const cpu = await BackendCpu.start(db.url, [POOLS.api, POOLS.lists]);
    const requests = await repeatRoute(dashboard, path, ROUTE_SECONDS);
    const used = await cpu.stop();
    const perRequestMs = (seconds: number) => (seconds * 1000) / requests;
    costs.push({ route, readsMs: perRequestMs(used.get(POOLS.lists)!), primaryMs: perRequestMs(used.get(POOLS.api)!) });
  }
  return costs;
}

async function attemptsIn24h(db: BenchDatabase): Promise<number> {
  return withClient(db.url, async (client) =>
    Number((await client.query(`SELECT count(*) AS n FROM webhook_attempts WHERE attempted_at > now() - interval '24 hours'`)).rows[0].n),
  );
}

/**
 * Writes `count` deliveries to the endpoint, spread evenly over the last 24 hours (to a minute
 * ago), each with its event and one 2xx attempt of 10 to 99 ms, into their day partitions.
 */
async function writeHistory(db: BenchDatabase, endpointId: number, count: number): Promise<void> {
  await withClient(db.url, async (client) => {
    await client.query(
      `SELECT webhook_ensure_day_partitions(((now() - interval '1 day') AT TIME ZONE 'UTC')::date, (now() AT TIME ZONE 'UTC')::date)`,
    );
    for (let done = 0; done < count; done += HISTORY_CHUNK) await writeHistoryChunk(client, endpointId, done, Math.min(HISTORY_CHUNK, count - done), count);
    await client.query('VACUUM ANALYZE');
  });
}

/** Rows `from` to `from + chunk - 1` of a history of `count` deliveries, the first a day ago. */
async function writeHistoryChunk(client: Client, endpointId: number, from: number, chunk: number, count: number): Promise<void> {
  await client.query(
    `WITH made AS (
       SELECT n, now() - interval '1 day' + (n * ((86400000.0 - 60000) / $3)) * interval '1 millisecond' AS at
         FROM generate_series($1::int, $1::int + $2::int - 1) AS n
     ), ids AS (
       SELECT n, webhook_new_id('evt_', at) AS event_id, webhook_new_id('msg_', at) AS id FROM made
     ), events AS (
       INSERT INTO webhook_events (id, created_at, kind, event, body)
       SELECT event_id, webhook_id_time(event_id), 'post', 'post.created', repeat('x', 400) FROM ids
     ), deliveries AS (
       INSERT INTO webhook_deliveries (id, created_at, event_id, endpoint_id, url, event, status, attempts, enqueued_at, delivered_at)
       SELECT id, webhook_id_time(id), event_id, $4, 'https://example.com/hooks', 'post.created', 'succeeded', 1, webhook_id_time(id), webhook_id_time(id) FROM ids
     )
     INSERT INTO webhook_attempts (delivery_id, delivery_created_at, attempt_number, status_code, duration_ms, response_body, attempted_at)
     SELECT id, webhook_id_time(id), 1, 200, 10 + n % 90, '{"ok":true}', webhook_id_time(id) FROM ids`,
    [from, chunk, count, endpointId],
  );
}

function replicaSection(
  settings: BenchSettings,
  posts: number,
  alone: Phase[],
  read: Phase[],
  small: { attempts: number; costs: RouteCost[] },
  large: { attempts: number; costs: RouteCost[] },
): Section {
  // The writes per second of load: their CPU per delivery at the posting rate (the window's
  // tail, waiting for the last deliveries, would dilute a plain CPU / window). The reads run at
  // their rate through the whole window, so theirs is CPU / window.
  const writesPerS = (phase: Phase) => (phase.writesCpuS * 1000 * settings.capacityRate) / phase.deliveries;
  const readsPerS = (phase: Phase) => (phase.readsCpuS * 1000) / phase.seconds;
  const writesAlone = alone.map(writesPerS);
  const writesRead = read.map(writesPerS);
  const shares = read.map((phase) => (100 * readsPerS(phase)) / (readsPerS(phase) + writesPerS(phase)));
  const views = read.reduce((sum, phase) => sum + phase.views, 0);
  const requests = read.reduce((sum, phase) => sum + phase.requests, 0);
  const failed = read.reduce((sum, phase) => sum + phase.failed, 0);
  const perView = (read.reduce((sum, phase) => sum + phase.readsCpuS, 0) * 1000) / views;
  const routeFigure = (cost: RouteCost, i: number): Figure => {
    const growth = ((cost.readsMs - small.costs[i].readsMs) * 100_000) / (large.attempts - small.attempts);
    return {
      name: `PostgreSQL backend CPU per GET ${VIEW_ROUTES[cost.route]}`,
      unit: 'ms',
      ours: cost.readsMs,
      oursDetail: `with ${formatNumber(small.attempts)} attempts in the last 24 h: ${formatNumber(small.costs[i].readsMs)} ms, so ${growth >= 0 ? '+' : ''}${formatNumber(growth)} ms per 100,000 attempts; left on the primary: ${formatNumber(cost.primaryMs)} ms`,
    };
  };
  const problem = failed > 0 ? `${failed} of ${requests} dashboard reads failed` : undefined;
  return {
    title: `Read replicas: what the dashboards' reads cost the primary (${formatNumber(posts)} posts at ${formatNumber(settings.capacityRate)}/s, ${formatNumber(settings.replicaViewsPerS)} dashboard views/s)`,
    figures: [
      {
        name: `PostgreSQL backend CPU of ${formatNumber(settings.capacityRate)} posts/s and their deliveries (api primary pool and worker), dashboards reading`,
        unit: 'ms/s',
        ours: median(writesRead),
        oursDetail: `${(median(writesRead) / settings.capacityRate).toFixed(2)} ms per delivery`,
        baseline: { name: 'the same load, no dashboard', value: median(writesAlone) },
        baselineDetail: `${(median(writesAlone) / settings.capacityRate).toFixed(2)} ms per delivery`,
        ratios: roundRatios(writesRead, writesAlone),
      },
      {
        name: "PostgreSQL backend CPU of the dashboards' reads (the list reader's pool: what a replica serves)",
        unit: 'ms/s',
        ours: median(read.map(readsPerS)),
        oursDetail: `${formatNumber(perView)} ms per view of ${formatNumber(requests / views)} reads, ${formatNumber(views)} views`,
        problem,
      },
      {
        name: 'share of PostgreSQL backend CPU a replica takes off the primary',
        unit: '%',
        ours: median(shares),
        oursDetail: `rounds ${shares.map((share) => share.toFixed(0)).join(', ')}`,
        problem,
      },
      ...large.costs.map(routeFigure),
    ],
    notes: [
      `The capacity section's load (posts through api layout b, open loop at ${formatNumber(settings.capacityRate)}/s for ${settings.latencyDurationS} s, one endpoint, one worker), on a database holding ${formatNumber(settings.replicaHistory)} delivered attempts over the last 24 h (\`BENCH_REPLICA_HISTORY\`), without and with dashboards reading, taking turns for ${settings.rounds} rounds. A dashboard view is what the dashboard reads when it is opened or a panel refreshed (it polls nothing on a timer): the overview's health with the last hour's series, the endpoint list and each listed endpoint's health, and the deliveries list, 20 to a page, the panels at once; ${formatNumber(settings.replicaViewsPerS)} views a second (\`BENCH_REPLICA_VIEWS_PER_S\`) is, say, ten operators each refreshing every five seconds. The reader holds a read-only operator key, so none of its reads is sent to the primary for a write of its own.`,
      `The api's DATABASE_REPLICA_URL names the run's own database under another application_name: the reads a replica would serve run on backends of their own, beside those of the api's primary pool and the worker's; each pool's backends are listed (pg_stat_activity) and their CPU read (/proc) every 250 ms over the same window, from the first post to the last delivery recorded. The writes' figure per second is their CPU per delivery times the posting rate (the window's tail, after the last post, would dilute CPU over the window); the reads run at their rate through the whole window, so theirs is their CPU over it. The share is the reads' part of the two, round by round, both measured in the same window, so load from other processes on the machine hits both alike. The writes' CPU per delivery follows how much the api and the worker batch (group commit, batched claims), and they batch more as PostgreSQL slows: on a small machine the reads' load makes the writes cheaper per delivery (the first ratio below 1), the machine's other load moves it either way, and the reads themselves leave nothing on the primary (the per-request figures).`,
      `Per request: each read of a view sent alone, one after the other for ${ROUTE_SECONDS} s, after the history was written (${formatNumber(large.attempts)} attempts in the last 24 h) and, in the detail, before it. The health and stats reads scan the attempts of the last 24 h (an endpoint's health its whole log, for the last success and failure), so their cost grows with the rate; the lists read one page and do not.`,
    ],
  };
}

if (require.main === module) {
  runReplicaBench(loadBenchSettings()).then(
    (section) => process.stdout.write(formatSection(section)),
    (error: unknown) => {
      process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
      process.exitCode = 1;
    },
  );
}
