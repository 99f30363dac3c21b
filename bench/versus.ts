import { randomBytes } from 'node:crypto';
import { apiTarget, detail, Measured, measureTargets, problemOf, Scenario, seedPosts } from './api';
import { createBenchDatabase, createBenchRedisPrefix } from './lib/bench-database';
import { Build, buildAt, requireFrom, THIS_BUILD } from './lib/children';
import { deliverThroughOurWorker, describeMeasurement, measureWorkers, subscribeOnly, WorkerMeasurement } from './lib/delivery-run';
import { Figure, formatNumber, formatSection, Section } from './lib/report';
import { Latency, measureLatency } from './delivery';
import { Scope, withScope } from './lib/scope';
import { startApi, startSink, startWorker } from './lib/services';
import { BenchSettings, loadBenchSettings } from './lib/settings';
import { measureOps } from './lib/timing';
import { median, roundRatios, takeTurns } from './lib/turns';
import { envelopeOfSize, SIZES } from './signing';
import * as signing from '../shared/webhook/signing';

/**
 * This checkout against another (BENCH_VERSUS, e.g. the commit before a change), side by side
 * in one run: both versions' apis in both layouts, their signing modules, their workers and
 * their post-commit-to-receipt latency take turns round by round, so a before/after ratio is
 * measured under the same noise rather than read from two runs' ratios to their baselines
 * (whose own processes the two versions load differently). Each version runs on a database
 * its own migrations made, with the same seed, and adds its jobs with its own queue module,
 * as its outbox does. `BENCH_VERSUS_PARTS` picks which of these figures to measure.
 *
 * @throws Error when BENCH_VERSUS is unset or names an unbuilt checkout
 */
export async function runVersusBench(settings: BenchSettings): Promise<Section> {
  if (!settings.versus) throw new Error('the versus section needs BENCH_VERSUS: the folder of another built checkout');
  const other = buildAt(settings.versus);
  const scope = new Scope();
  try {
    const redisPrefix = createBenchRedisPrefix(scope, settings.redisUrl);
    const builds = [THIS_BUILD, other] as const;
    const parts = settings.versusParts;
    const figures: Figure[] = [];
    if (parts.has('signing')) figures.push(...compareSigning(settings, other));
    if (parts.has('api')) figures.push(...(await compareApis(scope, settings, builds, redisPrefix)));
    if (parts.has('delivery')) {
      const delivery = await measureDeliveries(scope, settings, builds, redisPrefix);
      const incomplete = delivery.flat().filter((m) => m.run.succeeded !== m.run.events);
      figures.push({
        name: 'webhooks delivered end to end',
        unit: 'webhooks/s',
        ours: median(delivery[0].map((m) => m.run.perSecond)),
        problem:
          incomplete.length === 0
            ? undefined
            : `${formatNumber(incomplete[0].run.succeeded ?? 0)} of ${formatNumber(incomplete[0].run.events)} recorded as succeeded in a round`,
        oursDetail: describeMeasurement(delivery[0][delivery[0].length - 1]),
        baseline: { name: other.name, value: median(delivery[1].map((m) => m.run.perSecond)) },
        baselineDetail: describeMeasurement(delivery[1][delivery[1].length - 1]),
        ratios: roundRatios(
          delivery[0].map((m) => m.run.perSecond),
          delivery[1].map((m) => m.run.perSecond),
        ),
      });
    }
    if (parts.has('latency')) {
      const latency = await measureLatencies(settings, builds, redisPrefix);
      figures.push(
        ...settings.latencyRates.flatMap((rate, r) =>
          (['p50', 'p99'] as const).map(
            (quantile): Figure => ({
              name: `post commit to receipt at ${formatNumber(rate)} posts/s, ${quantile}`,
              unit: 'ms',
              ours: median(latency[r][0].map((point) => point[quantile])),
              problem: latency[r].flat().find((point) => point.problem)?.problem,
              oursDetail: latencyDetail(latency[r][0]),
              baseline: { name: other.name, value: median(latency[r][1].map((point) => point[quantile])) },
              baselineDetail: latencyDetail(latency[r][1]),
              ratios: roundRatios(
                latency[r][0].map((point) => point[quantile]),
                latency[r][1].map((point) => point[quantile]),
              ),
            }),
          ),
        ),
      );
    }
    return {
      title: `This checkout against ${other.name} (BENCH_VERSUS), taking turns in ${settings.rounds} rounds`,
      figures,
      notes: [
        `The baseline column is the other checkout (${settings.versus}); the ratio is this checkout's figure over its figure, the median of the per-round ratios with their min-max (signing: the ratio of the medians of ${settings.signRounds} rounds, as in the signing section).`,
        'Signing: both versions\' `shared/webhook/signing` loaded in this process, the same body, id, timestamp and secret, taking turns within every round.',
        `API: the four apis (layouts a and b of each version) run side by side, each version on its own database (${formatNumber(settings.apiPosts)} posts seeded alike), and take turns as in the API section: ${settings.apiDurationS} s per contender and round after ${settings.apiWarmupS} s of warm-up, ${settings.apiConnections} connections.`,
        `Latency: at each rate of the curve, each version's api (layout b) and worker, started afresh on a database of its own for each turn, take ${settings.rounds} turns of ${settings.latencyDurationS} s of paced posts as in the delivery section; a latency ratio above 1 means this checkout is slower.`,
        `Delivery: the two workers run side by side, each on its own database and Redis prefix, delivering to one sink; after a warm-up batch each they take turns, ${formatNumber(Math.round(settings.events / settings.rounds))} webhooks per round, rows written as each version's outbox writes them (with events stored once, an event row per delivery) and jobs added with each version's queue module.`,
      ],
    };
  } finally {
    await scope.close();
  }
}

/** Both versions' apis in both layouts, taking turns (the API section's scenarios), each version on its own database. */
async function compareApis(scope: Scope, settings: BenchSettings, builds: readonly Build[], redisPrefix: string): Promise<Figure[]> {
  const dbs = await Promise.all(builds.map((build) => createBenchDatabase(scope, settings.databaseUrl, { build })));
  const pids = (await Promise.all(dbs.map((db) => seedPosts(db, settings.apiPosts))))[0];
  const api = await measureTargets(
    settings,
    builds.flatMap((build, i) =>
      (['a', 'b'] as const).map((layout) =>
        apiTarget(`${layout} ${build.name}`, dbs[i], layout, (s) => startApi(s, settings, dbs[i].url, `${redisPrefix}_${i}${layout}`, layout, build)),
      ),
    ),
    pids,
  );
  const [ours, other] = builds;
  const apiFigure = (title: string, layout: 'a' | 'b', scenario: Scenario): Figure => {
    const mine = api.get(`${layout} ${ours.name}`)![scenario];
    const theirs = api.get(`${layout} ${other.name}`)![scenario];
    return {
      name: title,
      unit: 'req/s',
      ours: median(mine.map((m: Measured) => m.rps)),
      problem: problemOf(mine) ?? (problemOf(theirs) && `${other.name}: ${problemOf(theirs)}`),
      oursDetail: detail(mine),
      baseline: { name: other.name, value: median(theirs.map((m) => m.rps)) },
      baselineDetail: detail(theirs),
      ratios: roundRatios(
        mine.map((m) => m.rps),
        theirs.map((m) => m.rps),
      ),
    };
  };
  return [
    apiFigure('GET one post, layout a (cached)', 'a', 'get'),
    apiFigure('GET one post, layout b', 'b', 'get'),
    apiFigure('list 20, layout a (cached)', 'a', 'list'),
    apiFigure('list 20, layout b', 'b', 'list'),
    apiFigure('create, layout a', 'a', 'create'),
    apiFigure('create, layout b', 'b', 'create'),
  ];
}

/**
 * The latency curve of both versions, taking turns at each rate (each turn starts its services afresh, on a database of its own).
 *
 * @returns per rate of `settings.latencyRates`, per build, one measurement per round
 */
async function measureLatencies(settings: BenchSettings, builds: readonly Build[], redisPrefix: string): Promise<Latency[][][]> {
  const curve: Latency[][][] = [];
  for (const rate of settings.latencyRates) {
    curve.push(
      await takeTurns(
        settings.rounds,
        builds.map((build, i) => ({
          name: build.name,
          // A database per turn: Layout B draws pids at random from 90,000, and a database that
          // kept every turn's posts would make the later turns' creates retry more, so the
          // figure would depend on the round more than on the version.
          run: (round: number) =>
            withScope(async (inner) =>
              measureLatency(inner, settings, await createBenchDatabase(inner, settings.databaseUrl, { build }), `${redisPrefix}_l${i}_${rate}_${round}`, 'paced', rate, build),
            ),
        })),
      ),
    );
  }
  return curve;
}

function latencyDetail(points: readonly Latency[]): string {
  const last = points[points.length - 1];
  return `${formatNumber(median(points.map((point) => point.rate)))} posts/s achieved, machine CPU ${median(points.map((point) => point.machineCores)).toFixed(2)} cores, max ${formatNumber(last.max)} ms in the last round`;
}

/**
 * Sign and verify per second of both versions' signing modules on the same envelopes, taking
 * turns within every round (lib/timing.ts); each pair is first checked to give the same bytes.
 *
 * @throws Error when the two versions sign a body differently
 */
function compareSigning(settings: BenchSettings, other: Build): Figure[] {
  const theirs = requireFrom<typeof signing>(other, 'shared', 'webhook', 'signing.js');
  const secret = `whsec_${randomBytes(32).toString('base64')}`;
  const id = 'msg_2b4Cxb0Yqfd8yV3bJ6yE1Q';
  const timestamp = Math.floor(Date.now() / 1000);
  const figures: Figure[] = [];
  for (const [label, bytes] of SIZES) {
    const body = envelopeOfSize(bytes);
    const headers = { 'webhook-id': id, 'webhook-timestamp': String(timestamp), 'webhook-signature': signing.signStandard(id, timestamp, body, secret) };
    const hex = signing.signHex(body, secret);
    if (theirs.signStandard(id, timestamp, body, secret) !== headers['webhook-signature'] || theirs.signHex(body, secret) !== hex) {
      throw new Error(`the two versions sign the ${label} body differently`);
    }
    const pairs: [string, (module: typeof signing) => unknown][] = [
      [`sign webhook-signature, ${label}`, (module) => module.signStandard(id, timestamp, body, secret)],
      [`verify webhook-signature, ${label}`, (module) => module.verifyStandard(body, headers, secret)],
      [`sign X-Signature, ${label}`, (module) => module.signHex(body, secret)],
      [`verify X-Signature, ${label}`, (module) => module.verifyHex(body, secret, hex)],
      [`all delivery headers (one attempt), ${label}`, (module) => module.signedHeaders({ id, timestamp, body, secret })],
    ];
    for (const [name, operation] of pairs) {
      const [ours, before] = measureOps([() => operation(signing), () => operation(theirs)], { rounds: settings.signRounds, roundMs: settings.signRoundMs });
      figures.push({ name, unit: 'ops/s', ours, baseline: { name: other.name, value: before } });
    }
  }
  return figures;
}

/** Both versions' workers, on a database and prefix each, take turns delivering to one sink. */
async function measureDeliveries(
  scope: Scope,
  settings: BenchSettings,
  builds: readonly Build[],
  redisPrefix: string,
): Promise<WorkerMeasurement[][]> {
  const secret = `whsec_${randomBytes(32).toString('base64')}`;
  const sink = await startSink(scope, settings, { secret });
  const setups = await Promise.all(
    builds.map(async (build, i) => {
      const db = await createBenchDatabase(scope, settings.databaseUrl, { build });
      return { build, db, prefix: `${redisPrefix}_w${i}`, endpointId: await subscribeOnly(db, `${sink.url}/webhooks/posts`, secret) };
    }),
  );
  const perRound = Math.max(1, Math.round(settings.events / settings.rounds));
  const warmup = Math.min(1_000, Math.ceil(perRound / 4));
  return withScope(async (inner) => {
    const workers = await Promise.all(
      setups.map((setup, i) => startWorker(inner, settings, setup.db.url, setup.prefix, `webhook-worker-${i}`, settings.workerConcurrency, {}, setup.build)),
    );
    const contenders = setups.map((setup, i) => ({
      name: setup.build.name,
      run: (events: number) =>
        measureWorkers([workers[i]], () => deliverThroughOurWorker(settings, setup.db, setup.prefix, sink, setup.endpointId, events, 1, setup.build)),
    }));
    for (const contender of contenders) await contender.run(warmup);
    return takeTurns(
      settings.rounds,
      contenders.map((contender) => ({ name: contender.name, run: () => contender.run(perRound) })),
    );
  });
}

if (require.main === module) {
  runVersusBench(loadBenchSettings()).then(
    (section) => process.stdout.write(formatSection(section)),
    (error: unknown) => {
      process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
      process.exitCode = 1;
    },
  );
}
