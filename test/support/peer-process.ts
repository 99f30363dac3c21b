import { ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { createInterface } from 'node:readline';

/** A test peer (a server on 127.0.0.1) running as its own process. */
export interface PeerProcess {
  readonly port: number;
  /** Stops it with SIGTERM and resolves once it has exited. */
  close(): Promise<void>;
}

/**
 * Starts one of this folder's `*-process.mjs` peers. Such a peer prints one JSON line per
 * event on stdout: `{"port"}` once listening, then whatever it reports.
 *
 * @param script - the file name in this folder, e.g. `forward-proxy-process.mjs`
 * @param env - its environment, beside PATH
 * @param onEvent - called with every line after the port's, parsed
 * @throws when the process exits before it listens
 */
export async function startPeerProcess<Event>(script: string, env: Record<string, string>, onEvent: (event: Event) => void): Promise<PeerProcess> {
  const child: ChildProcess = spawn(process.execPath, [path.join(__dirname, script)], {
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`${script} exited with ${code} before listening`)));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const event = JSON.parse(line) as Event | { port: number };
      if (typeof event === 'object' && event !== null && 'port' in event) resolve(event.port);
      else onEvent(event);
    });
  });
  return {
    port,
    async close() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      await exited;
    },
  };
}
