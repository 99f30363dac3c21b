/** Sizes and targets of one benchmark run, read from the environment (see bench/RESULTS.md). */
export interface BenchSettings {
  /** `BENCH_QUICK=1`: smaller defaults for a smoke run of about a minute. */
  quick: boolean;
  /** Sections to run, from `BENCH_ONLY` (comma-separated); default all. */
  only: ReadonlySet<string>;
  databaseUrl: string;
  redisUrl: string;
  signRounds: number;
  signRoundMs: number;
  apiConnections: number;
  /** Seconds of one measured run of one API contender; each figure takes `rounds` of them. */
  apiDurationS: number;
  apiWarmupS: number;
  /** Posts seeded before the API runs. */
  apiPosts: number;
  /** Rounds in which the contenders of a figure take turns (lib/turns.ts); the median is reported. */
  rounds: number;
  /** Webhooks per throughput figure (ours and the bare worker each), split over the rounds. */
  events: number;
  workerConcurrency: number;
  /** The rate of the latency goal (p99 < 100 ms) and of the burst reference, posts/s. */
  latencyRate: number;
  /** The rates of the latency curve, posts/s, ascending; the goal's rate among them. */
  latencyRates: number[];
  /** Seconds of posts at each rate of the curve (and of the capacity run). */
  latencyDurationS: number;
  /** Posts per second of the capacity run: well below saturation, so queueing stays out of its figures. */
  capacityRate: number;
  /** Replica section: dashboard views opened per second during the capacity load (each view four reads). */
  replicaViewsPerS: number;
  /** Replica section: delivered attempts written over the last 24 h before its load, so the stats read a window of some size. */
  replicaHistory: number;
  /** Storage section: deliveries written on each of the 30 days retention prunes. */
  retentionDayDeliveries: number;
  /** Storage section: deliveries (each with its event and attempt) the day partitions' migration runs on. */
  migrationDeliveries: number;
  /** Stats section: the attempts in the window its reads are measured at, ascending. */
  statsSizes: number[];
  /** Deliveries held behind one unanswering endpoint in the parked run. */
  parkedDeliveries: number;
  /** Seconds over which the parked run measures the worker's CPU (and the idle baseline's). */
  parkedWindowS: number;
  scalingEvents: number;
  scalingDelayMs: number;
  /** Worker concurrency of the second scaling run, low enough that the endpoint's delay, not CPU, bounds one worker. */
  scalingLowConcurrency: number;
  scalingLowEvents: number;
  /** When set, every child process runs with `--cpu-prof` and writes its profile here. */
  cpuProfDir?: string;
  /**
   * `BENCH_VERSUS`: the folder of another checkout of this project, built (`npm ci` and `npm run
   * build` there), whose api and worker the `versus` section measures against this checkout's.
   */
  versus?: string;
  /** `BENCH_VERSUS_PARTS`: which figures the `versus` section measures (comma-separated); default all. */
  versusParts: ReadonlySet<VersusPart>;
}

/** The figures of the `versus` section, which `BENCH_VERSUS_PARTS` picks from. */
export const VERSUS_PARTS = ['signing', 'api', 'delivery', 'latency'] as const;
export type VersusPart = (typeof VERSUS_PARTS)[number];

/** The sections of a run, in the order `run-all` runs them. */
export const SECTIONS = ['signing', 'api', 'delivery', 'partitions', 'scaling', 'capacity', 'replica', 'parked', 'storage', 'stats', 'versus'] as const;

/**
 * Reads the settings once. Every size has a full default (what bench/RESULTS.md reports) and a
 * smaller one under `BENCH_QUICK=1`; an explicit variable wins over both.
 *
 * @throws Error naming the variable when a value is not a positive number
 */
export function loadBenchSettings(env: NodeJS.ProcessEnv = process.env): BenchSettings {
  const quick = env.BENCH_QUICK === '1' || env.BENCH_QUICK === 'true';
  const num = (name: string, full: number, smoke: number): number => {
    const raw = env[name];
    if (raw === undefined || raw === '') return quick ? smoke : full;
    const value = Number(raw);
    if (!Number.isFinite(value) || value <= 0) throw new Error(`Invalid ${name}: expected a positive number, got "${raw}"`);
    return value;
  };
  const versus = env.BENCH_VERSUS || undefined;
  // `versus` needs another checkout: the default run includes it only when one is named.
  const sections = SECTIONS.filter((name) => name !== 'versus' || versus);
  const only = new Set((env.BENCH_ONLY ?? sections.join(',')).split(',').map((s) => s.trim()).filter(Boolean));
  for (const name of only) {
    if (!(SECTIONS as readonly string[]).includes(name)) throw new Error(`Invalid BENCH_ONLY: unknown section "${name}"`);
  }
  if (only.has('versus') && !versus) throw new Error('BENCH_ONLY=versus needs BENCH_VERSUS: the folder of another built checkout');
  const versusParts = new Set((env.BENCH_VERSUS_PARTS ?? VERSUS_PARTS.join(',')).split(',').map((s) => s.trim()).filter(Boolean));
  for (const part of versusParts) {
    if (!(VERSUS_PARTS as readonly string[]).includes(part)) throw new Error(`Invalid BENCH_VERSUS_PARTS: unknown part "${part}"`);
  }
  const events = num('BENCH_EVENTS', 20_000, 2_000);
  const latencyRate = num('BENCH_LATENCY_RATE', 500, 500);
  const rates = (env.BENCH_LATENCY_RATES ?? `100,250,${latencyRate}`).split(',').map((raw) => {
    const value = Number(raw.trim());
    if (!Number.isFinite(value) || value <= 0) throw new Error(`Invalid BENCH_LATENCY_RATES: "${raw}" is not a positive number`);
    return value;
  });
  return {
    quick,
    only,
    databaseUrl: env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres',
    redisUrl: env.REDIS_URL || 'redis://127.0.0.1:6379',
    signRounds: num('BENCH_SIGN_ROUNDS', 7, 3),
    signRoundMs: num('BENCH_SIGN_ROUND_MS', 200, 50),
    apiConnections: num('BENCH_API_CONNECTIONS', 32, 32),
    apiDurationS: num('BENCH_API_DURATION_S', 3, 1),
    apiWarmupS: num('BENCH_API_WARMUP_S', 3, 1),
    apiPosts: num('BENCH_POSTS', 10_000, 1_000),
    rounds: Math.round(num('BENCH_ROUNDS', 5, 2)),
    events,
    workerConcurrency: num('BENCH_WORKER_CONCURRENCY', 50, 50),
    latencyRate,
    latencyRates: [...new Set([...rates, latencyRate])].sort((a, b) => a - b),
    latencyDurationS: num('BENCH_LATENCY_DURATION_S', 10, 2),
    capacityRate: num('BENCH_CAPACITY_RATE', 200, 200),
    replicaViewsPerS: num('BENCH_REPLICA_VIEWS_PER_S', 2, 2),
    replicaHistory: num('BENCH_REPLICA_HISTORY', 100_000, 10_000),
    retentionDayDeliveries: num('BENCH_RETENTION_DAY_DELIVERIES', 30_000, 1_000),
    migrationDeliveries: num('BENCH_MIGRATION_DELIVERIES', 1_000_000, 20_000),
    statsSizes: (env.BENCH_STATS_SIZES ?? (quick ? '10000,50000' : '10000,100000,1000000')).split(',').map((raw) => {
      const value = Number(raw.trim());
      if (!Number.isInteger(value) || value <= 0) throw new Error(`Invalid BENCH_STATS_SIZES: "${raw}" is not a positive whole number`);
      return value;
    }).sort((a, b) => a - b),
    parkedDeliveries: num('BENCH_PARKED_DELIVERIES', 300, 300),
    parkedWindowS: num('BENCH_PARKED_WINDOW_S', 60, 15),
    scalingEvents: num('BENCH_SCALING_EVENTS', events, 2_000),
    scalingDelayMs: num('BENCH_RECEIVER_DELAY_MS', 20, 20),
    scalingLowConcurrency: num('BENCH_SCALING_LOW_CONCURRENCY', 5, 5),
    scalingLowEvents: num('BENCH_SCALING_LOW_EVENTS', 5_000, 1_000),
    cpuProfDir: env.BENCH_CPU_PROF || undefined,
    versus,
    versusParts: versusParts as Set<VersusPart>,
  };
}
