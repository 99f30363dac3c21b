import autocannon from 'autocannon';
import { seedPosts } from './api';
import { createBenchDatabase, createBenchRedisPrefix } from './lib/bench-database';
import { buildAt, THIS_BUILD } from './lib/children';
import { formatNumber } from './lib/report';
import { withScope } from './lib/scope';
import { RunningServer, startApi, startBaselineServer } from './lib/services';
import { loadBenchSettings } from './lib/settings';
import { median, takeTurns } from './lib/turns';

/** One contender of the cost run: a started server and the request it is sent. */
interface Contender {
  name: string;
  server: RunningServer;
  headers: Record<string, string>;
  path(pid: number): string;
}

/** One measured run of one contender. */
interface Cost {
  rps: number;
  /** The server process's CPU per answered request, microseconds. */
  cpuUs: number;
  failures: number;
}

/**
 * `node dist/bench/request-cost.js`: the api's CPU per GET one post in each layout beside the
 * Fastify + pg baseline (and, with BENCH_VERSUS, the other checkout's api), from the server
 * process's own CPU time (/proc) over each run. CPU per request is what the per-request
 * pipeline adds; unlike requests per second it hardly moves with the load of other processes
 * on a shared machine. The contenders take turns (lib/turns.ts) for BENCH_ROUNDS rounds of
 * BENCH_API_DURATION_S seconds with BENCH_API_CONNECTIONS connections, after one warm-up run
 * each; medians are printed.
 */
async function main(): Promise<void> {
  const settings = loadBenchSettings();
  const lines = await withScope(async (scope) => {
    const db = await createBenchDatabase(scope, settings.databaseUrl);
    const prefix = createBenchRedisPrefix(scope, settings.redisUrl);
    const pids = await seedPosts(db, settings.apiPosts);
    const user = { authorization: `Bearer ${db.token}`, user_id: String(db.userId) };
    const builds = settings.versus ? [THIS_BUILD, buildAt(settings.versus)] : [THIS_BUILD];
    const contenders: Contender[] = [];
    for (const [b, build] of builds.entries()) {
      for (const layout of ['a', 'b'] as const) {
        const server = await startApi(scope, settings, db.url, `${prefix}_${b}${layout}`, layout, build);
        contenders.push({ name: `layout ${layout}, ${build.name}`, server, headers: user, path: (pid) => `/api/v1/posts/${pid}` });
      }
    }
    contenders.push({ name: 'baseline', server: await startBaselineServer(scope, settings, db.url), headers: {}, path: (pid) => `/posts/${pid}` });

    const run = async (contender: Contender, duration: number): Promise<Cost> => {
      let next = 0;
      const cpuBefore = contender.server.child.cpuSeconds();
      const result = await autocannon({
        url: contender.server.url,
        connections: settings.apiConnections,
        duration,
        headers: contender.headers,
        requests: [{ method: 'GET', setupRequest: (request) => ({ ...request, path: contender.path(pids[next++ % pids.length]) }) }],
      });
      const cpuS = contender.server.child.cpuSeconds() - cpuBefore;
      const answered = result['2xx'] + result.non2xx;
      return { rps: result.requests.average, cpuUs: answered > 0 ? (cpuS * 1e6) / answered : Number.NaN, failures: result.non2xx + result.errors };
    };
    for (const contender of contenders) await run(contender, settings.apiWarmupS);
    const rounds = await takeTurns(
      settings.rounds,
      contenders.map((contender) => ({ name: contender.name, run: () => run(contender, settings.apiDurationS) })),
    );
    const baseline = median(rounds[rounds.length - 1].map((cost) => cost.cpuUs));
    return contenders.map((contender, i) => {
      const costs = rounds[i];
      const cpuUs = median(costs.map((cost) => cost.cpuUs));
      const failures = costs.reduce((sum, cost) => sum + cost.failures, 0);
      return `| ${contender.name} | ${formatNumber(median(costs.map((cost) => cost.rps)))} | ${formatNumber(cpuUs)} | ${(cpuUs / baseline).toFixed(2)}x | ${failures} |`;
    });
  });
  process.stdout.write(
    [
      `GET one post, ${settings.rounds} rounds of ${settings.apiDurationS} s, ${settings.apiConnections} connections (medians)`,
      '',
      '| contender | req/s | CPU per request, µs | CPU vs baseline | non-2xx or errors |',
      '|---|---|---|---|---|',
      ...lines,
      '',
    ].join('\n'),
  );
}

main().catch((error: unknown) => {
  process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
  process.exitCode = 1;
});
