import { ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import Redis from 'ioredis';
import { ROOT } from '../../support/processes';

export { freePort } from '../../support/processes';

export const WORKER_MAIN = path.join(ROOT, 'dist/services/webhook-worker/src/main.js');

/** Starts the built worker process (`npm run start:worker`) with these variables. */
export function spawnWorker(env: Record<string, string>): ChildProcess {
  if (!existsSync(WORKER_MAIN)) throw new Error('the worker is not built: run `npm run build` first');
  return spawn(process.execPath, [WORKER_MAIN], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', NODE_ENV: 'test', LOG_LEVEL: 'warn', WORKER_METRICS_PORT: '0', ...env },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
}

/** Resolves when the process has exited (at once when it already has). */
export function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

/** A throwaway redis-server without persistence, so a test can stop it without touching the shared one. */
export async function startRedisServer(port: number): Promise<ChildProcess> {
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: 'ignore',
  });
  const probe = new Redis({ port, host: '127.0.0.1', lazyConnect: true, retryStrategy: () => 50, maxRetriesPerRequest: null });
  probe.on('error', () => undefined);
  try {
    await probe.connect().catch(() => undefined);
    await probe.ping();
  } finally {
    probe.disconnect();
  }
  return child;
}
