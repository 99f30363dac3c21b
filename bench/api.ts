import autocannon from 'autocannon';
import { BenchDatabase, createBenchDatabase, createBenchRedisPrefix, withClient } from './lib/bench-database';
import { formatNumber, formatSection, Figure, Section } from './lib/report';
import { Scope, withScope } from './lib/scope';
import { median, roundRatios, takeTurns } from './lib/turns';
import { RunningServer, startApi, startBaselineServer } from './lib/services';
import { BenchSettings, loadBenchSettings } from './lib/settings';

export type Scenario = 'get' | 'list' | 'create';

/** How one server under test is reached for each scenario. */
export interface Target {
  name: string;
  /** Its database (creates are checked against the rows that appear there). */
  db: BenchDatabase;
  start(scope: Scope): Promise<RunningServer>;
  headers: Record<string, string>;
  getPath(pid: number): string;
  listPath: string;
  createPath: string;
  createBody: string;
}

/** One autocannon run's figures. */
export interface Measured {
  rps: number;
  p50: number;
  p99: number;
  rssBytes: number;
  /** 2xx answers (to check creates against the rows that appeared). */
  ok: number;
  /** Non-2xx answers and connection errors, in the measured run. */
  failures: number;
  /** Requests of the measured run. */
  total: number;
  /** For create: rows that really appeared in `posts` during the run (Layout B answers HTTP 200 even on failure). */
  inserted?: number;
}

/** Above this share of failed requests a figure measures errors, not the server. */
const MAX_FAILURE_SHARE = 0.01;

const SAMPLE_PIDS = 100;

/**
 * Requests per second, p50 and p99 latency, and the RSS after the run, of our api in layout
 * a and layout b beside a minimal Fastify + pg server, for GET one post, list 20 and create,
 * against the run's own database with the same seeded posts. The servers take turns round
 * by round (lib/turns.ts), so the machine's noise falls on all of them alike.
 */
export async function runApiBench(settings: BenchSettings): Promise<Section> {
  const scope = new Scope();
  try {
    const db = await createBenchDatabase(scope, settings.databaseUrl);
    const redisPrefix = createBenchRedisPrefix(scope, settings.redisUrl);
    const pids = await seedPosts(db, settings.apiPosts);
    const targets: Target[] = [
      apiTarget('layout a', db, 'a', (s) => startApi(s, settings, db.url, `${redisPrefix}_a`, 'a')),
      apiTarget('layout b', db, 'b', (s) => startApi(s, settings, db.url, `${redisPrefix}_b`, 'b')),
      {
        name: 'baseline',
        db,
        start: (s) => startBaselineServer(s, settings, db.url),
        headers: {},
        getPath: (pid) => `/posts/${pid}`,
        listPath: '/posts?limit=20',
        createPath: '/posts',
        createBody: JSON.stringify({ title: 'Benchmark post', content: POST_BODY, userId: db.userId }),
      },
    ];
    const results = await measureTargets(settings, targets, pids);

    const figure = (title: string, layout: 'a' | 'b', scenario: Scenario, goal?: number): Figure => {
      const ours = results.get(`layout ${layout}`)![scenario];
      const base = results.get('baseline')![scenario];
      const problem = problemOf(ours) ?? (problemOf(base) && `baseline: ${problemOf(base)}`);
      return {
        name: title,
        unit: 'req/s',
        ours: median(ours.map((m) => m.rps)),
        problem,
        oursDetail: detail(ours),
        baseline: { name: 'Fastify + pg', value: median(base.map((m) => m.rps)) },
        baselineDetail: detail(base),
        ratios: roundRatios(
          ours.map((m) => m.rps),
          base.map((m) => m.rps),
        ),
        goal,
      };
    };
    return {
      title: `API (autocannon, ${settings.apiConnections} connections, ${settings.rounds} rounds of ${settings.apiDurationS} s per contender and figure)`,
      figures: [
        figure('GET one post, layout a (cached)', 'a', 'get', 2.5),
        figure('GET one post, layout b', 'b', 'get', 1.0),
        figure('list 20, layout a (cached)', 'a', 'list'),
        figure('list 20, layout b', 'b', 'list', 0.8),
        figure('create, layout a', 'a', 'create', 0.7),
        figure('create, layout b', 'b', 'create', 0.7),
      ],
      notes: [
        `${settings.apiPosts} posts seeded; GET one post rotates over ${SAMPLE_PIDS} of them. The three servers run side by side for the whole section; for each scenario every server is warmed up for ${settings.apiWarmupS} s, then the servers take turns, ${settings.rounds} rounds of ${settings.apiDurationS} s each (order reversed every other round). Requests per second and latencies are the median of the rounds; the ratio is the median of the per-round ratios, with their min-max.`,
        'Our api authenticates every request (bearer token + user_id, from the credential cache once seen; the user has no quota, limit 0, so Layout A counts nothing) and writes the outbox on create: one webhook endpoint is subscribed, so each create also inserts a delivery row and adds a job to the queue (no worker runs in this section). The baseline does none of this.',
        "RSS is each server process's VmRSS after its last run; our services log at warn level and run with the node options of their start commands (`NODE_HEAP_FLAGS`, scripts/services.ts), the baseline has no logger and node's defaults.",
      ],
    };
  } finally {
    await scope.close();
  }
}

/** Our api in `layout` as a target: its routes, with the bearer token of `db`'s user. */
export function apiTarget(name: string, db: BenchDatabase, layout: 'a' | 'b', start: Target['start']): Target {
  const common = { name, db, start, headers: { authorization: `Bearer ${db.token}`, user_id: String(db.userId) }, getPath: (pid: number) => `/api/v1/posts/${pid}` };
  return layout === 'a'
    ? {
        ...common,
        listPath: '/api/v1/posts?limit=20',
        createPath: '/api/v1/posts/create',
        createBody: JSON.stringify({ title: 'Benchmark post', body: POST_BODY, userId: db.userId }),
      }
    : { ...common, listPath: '/api/v1/posts?limit=20', createPath: '/api/v1/posts', createBody: JSON.stringify({ title: 'Benchmark post', content: POST_BODY }) };
}

/**
 * Starts every target, then per scenario warms each one up and lets them take turns for the
 * run's rounds.
 *
 * @param pids - posts to GET, present in every target's database
 * @returns per target name, per scenario, one measurement per round
 */
export async function measureTargets(
  settings: BenchSettings,
  targets: readonly Target[],
  pids: number[],
): Promise<Map<string, Record<Scenario, Measured[]>>> {
  return withScope(async (scope) => {
    const servers = await Promise.all(targets.map((target) => target.start(scope)));
    const specs = targets.map((target): Record<Scenario, autocannon.RequestSpec> => {
      let next = 0;
      return {
        get: { method: 'GET', setupRequest: (request) => ({ ...request, path: target.getPath(pids[next++ % pids.length]) }) },
        list: { method: 'GET', path: target.listPath },
        create: { method: 'POST', path: target.createPath, headers: { 'content-type': 'application/json' }, body: target.createBody },
      };
    });
    const run = async (i: number, scenario: Scenario, duration: number): Promise<Measured> => {
      const options = { url: servers[i].url, connections: settings.apiConnections, headers: targets[i].headers, requests: [specs[i][scenario]] };
      const before = scenario === 'create' ? await countPosts(targets[i].db) : 0;
      const result = await autocannon({ ...options, duration });
      const failures = result.non2xx + result.errors;
      return {
        rps: result.requests.average,
        p50: result.latency.p50,
        p99: result.latency.p99,
        rssBytes: servers[i].child.rssBytes(),
        ok: result['2xx'],
        failures,
        total: result['2xx'] + failures,
        inserted: scenario === 'create' ? (await countPosts(targets[i].db)) - before : undefined,
      };
    };
    const results = new Map<string, Record<Scenario, Measured[]>>(targets.map((target) => [target.name, { get: [], list: [], create: [] }]));
    for (const scenario of ['get', 'list', 'create'] as const) {
      for (let i = 0; i < targets.length; i += 1) await run(i, scenario, settings.apiWarmupS);
      const rounds = await takeTurns(
        settings.rounds,
        targets.map((target, i) => ({ name: target.name, run: () => run(i, scenario, settings.apiDurationS) })),
      );
      targets.forEach((target, i) => (results.get(target.name)![scenario] = rounds[i]));
    }
    return results;
  });
}

/** Why a figure's rounds measure errors rather than the server, if they do. */
export function problemOf(rounds: readonly Measured[]): string | undefined {
  const total = rounds.reduce((sum, m) => sum + m.total, 0);
  const failures = rounds.reduce((sum, m) => sum + m.failures, 0);
  if (total === 0 || failures / total > MAX_FAILURE_SHARE) {
    return `${formatNumber(failures)} of ${formatNumber(total)} requests failed`;
  }
  const ok = rounds.reduce((sum, m) => sum + m.ok, 0);
  const inserted = rounds.reduce((sum, m) => sum + (m.inserted ?? 0), 0);
  if (rounds.some((m) => m.inserted !== undefined) && inserted < ok * (1 - MAX_FAILURE_SHARE)) {
    return `${formatNumber(ok)} creates answered 2xx but ${formatNumber(inserted)} rows appeared`;
  }
  return undefined;
}

/** Median latencies, last RSS and failures of a figure's rounds, for its detail column. */
export function detail(rounds: readonly Measured[]): string {
  const last = rounds[rounds.length - 1];
  const parts = [
    `p50 ${median(rounds.map((m) => m.p50))} ms`,
    `p99 ${median(rounds.map((m) => m.p99))} ms`,
    `RSS ${Math.round(last.rssBytes / 2 ** 20)} MB`,
  ];
  const failures = rounds.reduce((sum, m) => sum + m.failures, 0);
  if (failures > 0) parts.push(`${formatNumber(failures)} non-2xx or errors`);
  return parts.join(', ');
}

const POST_BODY = 'Lorem ipsum dolor sit amet, consectetur adipiscing elit. '.repeat(8).trim();

/**
 * Inserts `count` posts of user 1 (one per second of the past, newest last) and an endpoint
 * subscribed to every event, and returns a sample of pids for GET. Pids are the database's
 * sequence, so every database seeded with the same count has the same pids.
 */
export async function seedPosts(db: BenchDatabase, count: number): Promise<number[]> {
  return withClient(db.url, async (client) => {
    await client.query(
      `INSERT INTO posts (post_uuid, user_id, post_title, post_body, created_at, updated_at)
       SELECT gen_random_uuid(), $1, 'Post ' || g, $2, now() - g * interval '1 second', now() - g * interval '1 second'
         FROM generate_series(1, $3::int) AS g`,
      [db.userId, POST_BODY, count],
    );
    // Never contacted: no worker runs here; it makes creates write the outbox as in production.
    await client.query(`INSERT INTO webhook_endpoints (url, secret) VALUES ('http://127.0.0.1:9/unused', 'whsec_dW51c2VkLWJlbmNoLXNlY3JldA==')`);
    await client.query('ANALYZE posts');
    const { rows } = await client.query<{ pid: number }>('SELECT pid FROM posts ORDER BY random() LIMIT $1', [SAMPLE_PIDS]);
    return rows.map((row) => row.pid);
  });
}

async function countPosts(db: BenchDatabase): Promise<number> {
  return withClient(db.url, async (client) => Number((await client.query('SELECT count(*) AS n FROM posts')).rows[0].n));
}

if (require.main === module) {
  runApiBench(loadBenchSettings()).then(
    (section) => process.stdout.write(formatSection(section)),
    (error: unknown) => {
      process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
      process.exitCode = 1;
    },
  );
}
