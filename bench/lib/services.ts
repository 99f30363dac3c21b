import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { NODE_HEAP_FLAGS } from '../../scripts/services';
import type { SinkStats } from '../sink-receiver';
import { Build, buildPath, Child, distPath, firstMessage, startChild, THIS_BUILD, waitForHttp } from './children';
import { freePort, getJson } from './net';
import { Scope } from './scope';
import { serviceEnv } from './service-env';
import { BenchSettings } from './settings';

/** A started HTTP service and the base URL it answers on. */
export interface RunningServer {
  child: Child;
  url: string;
}

/**
 * Starts our api (`API_LAYOUT=layout`) on a free port, with its own upload folder, and waits
 * until `/ready` answers (database and Redis reachable).
 *
 * @param build - whose api: this checkout's, or another's (the versus section)
 * @param env - more variables, over the defaults (e.g. DATABASE_REPLICA_URL)
 */
export async function startApi(
  scope: Scope,
  settings: BenchSettings,
  databaseUrl: string,
  redisPrefix: string,
  layout: 'a' | 'b',
  build: Build = THIS_BUILD,
  env: Record<string, string> = {},
): Promise<RunningServer> {
  const port = await freePort();
  const uploadDir = await mkdtemp(path.join(tmpdir(), 'pw-bench-uploads-'));
  scope.add(`upload folder of api ${layout}`, () => rm(uploadDir, { recursive: true, force: true }));
  const url = `http://127.0.0.1:${port}`;
  const name = build === THIS_BUILD ? `api-${layout}` : `api-${layout}-${build.name}`;
  const child = startChild(scope, name, buildPath(build, 'services', 'api', 'src', 'server.js'), {
    env: serviceEnv(settings, databaseUrl, redisPrefix, { API_LAYOUT: layout, PORT: String(port), APP_URL: url, UPLOAD_DIR: uploadDir, ...env }),
    nodeArgs: NODE_HEAP_FLAGS,
    cpuProfDir: settings.cpuProfDir,
  });
  await waitForHttp(child, `${url}/ready`);
  return { child, url };
}

/** Starts the hand-written Fastify + pg baseline server and waits until it listens. */
export async function startBaselineServer(scope: Scope, settings: BenchSettings, databaseUrl: string): Promise<RunningServer> {
  const port = await freePort();
  const child = startChild(scope, 'baseline-server', distPath('bench', 'baseline-server.js'), {
    env: { DATABASE_URL: databaseUrl, PORT: String(port), NODE_ENV: 'production' },
    cpuProfDir: settings.cpuProfDir,
    ipc: true,
  });
  await firstMessage(child);
  return { child, url: `http://127.0.0.1:${port}` };
}

/**
 * Starts one of our webhook-workers, with the node options of its start command (`npm run
 * start:worker`, compose), and waits until its `/ready` answers.
 *
 * @param name - names the process in errors and its CPU profile
 * @param concurrency - WORKER_CONCURRENCY; default the run's setting
 * @param env - more variables, over the defaults above
 * @param build - whose worker: this checkout's, or another's (the versus section)
 */
export async function startWorker(
  scope: Scope,
  settings: BenchSettings,
  databaseUrl: string,
  redisPrefix: string,
  name: string,
  concurrency = settings.workerConcurrency,
  env: Record<string, string> = {},
  build: Build = THIS_BUILD,
): Promise<Child> {
  const port = await freePort();
  const child = startChild(scope, name, buildPath(build, 'services', 'webhook-worker', 'src', 'main.js'), {
    env: serviceEnv(settings, databaseUrl, redisPrefix, {
      WORKER_CONCURRENCY: String(concurrency),
      WORKER_METRICS_PORT: String(port),
      // The one sink stands for many endpoints: the per-endpoint cap (10) would measure the
      // isolation policy, not the delivery path the baseline is compared with.
      WEBHOOK_ENDPOINT_CONCURRENCY: '1000',
      ...env,
    }),
    nodeArgs: NODE_HEAP_FLAGS,
    cpuProfDir: settings.cpuProfDir,
  });
  await waitForHttp(child, `http://127.0.0.1:${port}/ready`);
  return child;
}

/**
 * Starts the baseline BullMQ worker (bench/bare-worker.ts) on `queue` and waits until it is
 * ready; with `databaseUrl` it runs in its bookkeeping mode (claims and records delivery rows).
 */
export async function startBareWorker(
  scope: Scope,
  settings: BenchSettings,
  redisPrefix: string,
  queue: string,
  databaseUrl?: string,
): Promise<Child> {
  const child = startChild(scope, databaseUrl ? 'bare-worker-recording' : 'bare-worker', distPath('bench', 'bare-worker.js'), {
    env: {
      ...(databaseUrl ? { BARE_DATABASE_URL: databaseUrl } : {}),
      REDIS_URL: settings.redisUrl,
      REDIS_PREFIX: redisPrefix,
      BARE_QUEUE: queue,
      WORKER_CONCURRENCY: String(settings.workerConcurrency),
      NODE_ENV: 'production',
    },
    cpuProfDir: settings.cpuProfDir,
    ipc: true,
  });
  await firstMessage(child);
  return child;
}

/** The benchmark receiver (bench/sink-receiver.ts) and its counters. */
export interface Sink extends RunningServer {
  stats(): Promise<SinkStats>;
  reset(): Promise<void>;
}

/** Options of {@link startSink}. */
export interface SinkOptions {
  /** Secret to verify `X-Signature` with. */
  secret: string;
  /** Milliseconds to wait before answering each webhook. */
  delayMs?: number;
  /** Measure the latency from the envelope's `_data.created_at` to receipt. */
  latency?: boolean;
}

/** Starts the benchmark receiver on a free port. */
export async function startSink(scope: Scope, settings: BenchSettings, options: SinkOptions): Promise<Sink> {
  const child = startChild(scope, 'sink-receiver', distPath('bench', 'sink-receiver.js'), {
    env: {
      SINK_SECRET: options.secret,
      SINK_DELAY_MS: String(options.delayMs ?? 0),
      SINK_LATENCY: options.latency ? '1' : '0',
      NODE_ENV: 'production',
    },
    cpuProfDir: settings.cpuProfDir,
    ipc: true,
  });
  const { port } = await firstMessage<{ port: number }>(child);
  const url = `http://127.0.0.1:${port}`;
  return {
    child,
    url,
    stats: () => getJson<SinkStats>(`${url}/stats`),
    async reset() {
      await fetch(`${url}/reset`, { method: 'POST' });
    },
  };
}
