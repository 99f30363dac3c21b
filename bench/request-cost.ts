import autocannon from 'autocannon';
import { apiTarget, seedPosts, Target } from './api';
import { createBenchDatabase, createBenchRedisPrefix } from './lib/bench-database';
import { buildAt, THIS_BUILD } from './lib/children';
import { formatNumber } from './lib/report';
import { withScope } from './lib/scope';
import { RunningServer, startApi, startBaselineServer } from './lib/services';
import { loadBenchSettings } from './lib/settings';
import { median, roundRatios, takeTurns } from './lib/turns';

type Scenario = 'get' | 'create';

/** One contender of the cost run: a started server and the requests it is sent. */
interface Contender {
  name: string;
  server: RunningServer;
  target: Pick<Target, 'headers' | 'getPath' | 'createPath' | 'createBody'>;
}

/** One measured run of one contender. */
interface Cost {
  rps: number;
  /** The server process's CPU per answered request, microseconds. */
  cpuUs: number;
  failures: number;
}

/**
 * `node dist/bench/request-cost.js`: the api's CPU per request in each layout beside the
 * Fastify + pg baseline (and, with BENCH_VERSUS, the other checkout's api), from the server
 * process's own CPU time (/proc) over each run, for GET one post (and create with
 * `BENCH_COST_SCENARIOS=get,create`). CPU per request is what the per-request pipeline adds;
 * it moves far less with the load of other processes on a shared machine than requests per
 * second do. The contenders take turns (lib/turns.ts) for BENCH_ROUNDS rounds of
 * BENCH_API_DURATION_S seconds with BENCH_API_CONNECTIONS connections, after one warm-up run
 * each; medians are printed.
 */
async function main(): Promise<void> {
  const settings = loadBenchSettings();
  const scenarios = (process.env.BENCH_COST_SCENARIOS ?? 'get').split(',') as Scenario[];
  const table = await withScope(async (scope) => {
    const db = await createBenchDatabase(scope, settings.databaseUrl);
    const prefix = createBenchRedisPrefix(scope, settings.redisUrl);
    const pids = await seedPosts(db, settings.apiPosts);
    const builds = settings.versus ? [THIS_BUILD, buildAt(settings.versus)] : [THIS_BUILD];
    const contenders: Contender[] = [];
    for (const [b, build] of builds.entries()) {
      for (const layout of ['a', 'b'] as const) {
        const server = await startApi(scope, settings, db.url, `${prefix}_${b}${layout}`, layout, build);
        contenders.push({ name: `layout ${layout}, ${build.name}`, server, target: apiTarget(layout, db, layout, () => Promise.resolve(server)) });
      }
    }
    // The baseline's create takes Layout B's body plus the user id.
    const layoutB = apiTarget('b', db, 'b', () => Promise.reject(new Error('not started here')));
    const baseline = { headers: {}, getPath: (pid: number) => `/posts/${pid}`, createPath: '/posts', createBody: JSON.stringify({ ...JSON.parse(layoutB.createBody), userId: db.userId }) };
    contenders.push({ name: 'baseline', server: await startBaselineServer(scope, settings, db.url), target: baseline });

    const run = async (contender: Contender, scenario: Scenario, duration: number): Promise<Cost> => {
      let next = 0;
      const { target } = contender;
      const cpuBefore = contender.server.child.cpuSeconds();
      const result = await autocannon({
        url: contender.server.url,
        connections: settings.apiConnections,
        duration,
        headers: target.headers,
        requests: [
          scenario === 'get'
            ? { method: 'GET', setupRequest: (request) => ({ ...request, path: target.getPath(pids[next++ % pids.length]) }) }
            : { method: 'POST', path: target.createPath, headers: { 'content-type': 'application/json' }, body: target.createBody },
        ],
      });
      const cpuS = contender.server.child.cpuSeconds() - cpuBefore;
      const answered = result['2xx'] + result.non2xx;
      return { rps: result.requests.average, cpuUs: answered > 0 ? (cpuS * 1e6) / answered : Number.NaN, failures: result.non2xx + result.errors };
    };
    const lines: string[] = [];
    for (const scenario of scenarios) {
      for (const contender of contenders) await run(contender, scenario, settings.apiWarmupS);
      const rounds = await takeTurns(
        settings.rounds,
        contenders.map((contender) => ({ name: contender.name, run: () => run(contender, scenario, settings.apiDurationS) })),
      );
      const base = rounds[rounds.length - 1];
      for (const [i, contender] of contenders.entries()) {
        const costs = rounds[i];
        const failures = costs.reduce((sum, cost) => sum + cost.failures, 0);
        const rpsRatio = median(roundRatios(costs.map((cost) => cost.rps), base.map((cost) => cost.rps)));
        const cpuRatio = median(roundRatios(costs.map((cost) => cost.cpuUs), base.map((cost) => cost.cpuUs)));
        lines.push(
          `| ${scenario} | ${contender.name} | ${formatNumber(median(costs.map((cost) => cost.rps)))} | ${rpsRatio.toFixed(2)}x | ${formatNumber(median(costs.map((cost) => cost.cpuUs)))} | ${cpuRatio.toFixed(2)}x | ${failures} |`,
        );
      }
    }
    return lines;
  });
  process.stdout.write(
    [
      `${settings.rounds} rounds of ${settings.apiDurationS} s, ${settings.apiConnections} connections (medians; ratios are medians of the per-round ratios to the baseline)`,
      '',
      '| scenario | contender | req/s | req/s vs baseline | CPU per request, µs | CPU vs baseline | non-2xx or errors |',
      '|---|---|---|---|---|---|---|',
      ...table,
      '',
    ].join('\n'),
  );
}

main().catch((error: unknown) => {
  process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
  process.exitCode = 1;
});
