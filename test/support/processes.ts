import { ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import path from 'node:path';

/** The repository root, where `dist/` is built by `npm test`'s pretest step. */
export const ROOT = path.resolve(__dirname, '..', '..');

/** A free TCP port on 127.0.0.1, found by binding port 0 and releasing it. */
export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, 'close');
  return port;
}

/** A service process started from the built `dist/` tree, as compose and `npm start` run it. */
export interface ServiceProcess {
  name: string;
  child: ChildProcess;
  /** Everything the process wrote to stdout and stderr, for failure messages. */
  output(): string;
  /** Sends the signal and resolves with the exit code (or signal name) once it exited. */
  stop(signal?: NodeJS.Signals): Promise<number | string>;
}

/**
 * Starts `node <script> [args]` from the repository root with `env` on top of this process's
 * environment, and resolves once `GET http://127.0.0.1:<readyPort>/ready` answers 200.
 *
 * @throws Error with the process output when it exits or is not ready within `timeoutMs`
 */
export async function startService(
  name: string,
  script: string,
  env: Record<string, string>,
  readyPort: number,
  timeoutMs = 20_000,
): Promise<ServiceProcess> {
  const child = spawn(process.execPath, [script], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  child.stdout?.on('data', (chunk: Buffer) => (log += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (log += chunk.toString()));
  const exited = once(child, 'exit').then(([code, signal]) => (code ?? signal) as number | string);
  const service: ServiceProcess = {
    name,
    child,
    output: () => log,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) break;
    const ready = await fetch(`http://127.0.0.1:${readyPort}/ready`).then((res) => res.ok, () => false);
    if (ready) return service;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  await service.stop('SIGKILL');
  throw new Error(`${name} did not become ready on port ${readyPort}:\n${log}`);
}

/**
 * Runs `node <script> [args]` to completion.
 *
 * @returns the exit code and everything written to stdout and stderr
 */
export async function runScript(
  script: string,
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [script, ...args], { cwd: ROOT, env: { ...process.env, ...env } });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const [code] = await once(child, 'exit');
  return { code: code as number | null, stdout, stderr };
}
