import { ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { createInterface } from 'node:readline';

/** One request as the proxy received it, before it authenticated or forwarded it. */
export interface ProxiedRequest {
  /** `CONNECT` for an https tunnel, else the forwarded request's method. */
  method: string;
  /** The request target: absolute form (`http://host:port/path`, RFC 9112 §3.2.2) or, for CONNECT, authority form (`host:port`). */
  target: string;
  /** The Proxy-Authorization header as sent, or null. */
  proxyAuthorization: string | null;
}

/** A real forward proxy (the `proxy` package) in a process of its own on 127.0.0.1. */
export interface ForwardProxy {
  /** `http://127.0.0.1:<port>`, without credentials. */
  readonly url: string;
  readonly port: number;
  /** Every request so far, oldest first. */
  readonly requests: ProxiedRequest[];
  /** Resolves once at least `count` requests were received; rejects after `timeoutMs` (default 5000). */
  waitForRequests(count: number, timeoutMs?: number): Promise<ProxiedRequest[]>;
  close(): Promise<void>;
}

/**
 * Starts a {@link ForwardProxy}.
 *
 * @param options - `credentials` (`user:password`): the proxy then answers 407 to requests
 *   without them as Basic Proxy-Authorization (RFC 9110 §11.7.2)
 */
export async function startForwardProxy(options: { credentials?: string } = {}): Promise<ForwardProxy> {
  const child: ChildProcess = spawn(process.execPath, [path.join(__dirname, 'forward-proxy-process.mjs')], {
    env: { PATH: process.env.PATH ?? '', ...(options.credentials ? { PROXY_CREDENTIALS: options.credentials } : {}) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const requests: ProxiedRequest[] = [];
  const waiters = new Set<() => void>();
  const listening = new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`the forward proxy exited with ${code} before listening`)));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const event = JSON.parse(line) as ProxiedRequest | { port: number };
      if ('port' in event) resolve(event.port);
      else requests.push(event);
      for (const wake of waiters) wake();
    });
  });
  const port = await listening;

  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    waitForRequests(count, timeoutMs = 5000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (requests.length < count) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(requests.slice());
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`expected ${count} requests at the proxy within ${timeoutMs} ms, got ${requests.length}`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    async close() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      await exited;
    },
  };
}
