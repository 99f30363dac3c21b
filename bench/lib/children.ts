import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Scope } from './scope';

/** A service started by the harness as its own node process. */
export interface Child {
  name: string;
  pid: number;
  process: ChildProcess;
  /** Resident set size now, bytes (VmRSS of /proc/<pid>/status). */
  rssBytes(): number;
  /** CPU time the process has used so far, user plus system, seconds. */
  cpuSeconds(): number;
  /** The last lines the process wrote to stdout and stderr, for error messages. */
  logTail(): string;
  /** SIGTERM, then SIGKILL if it has not exited within `graceMs`; resolves when it has exited. */
  stop(graceMs?: number): Promise<void>;
}

/** Options of {@link startChild}. */
export interface StartOptions {
  env: NodeJS.ProcessEnv;
  /** Options for node itself, before the script (e.g. the worker's heap settings). */
  nodeArgs?: readonly string[];
  /** When set, the process runs with `--cpu-prof` and writes its profile into this folder. */
  cpuProfDir?: string;
  /** Open an IPC channel (for the bench's own helper processes, which report over it). */
  ipc?: boolean;
}

const TAIL_LINES = 40;
/** Log lines are cut to this many characters: a stack trace per line would drown the error. */
const TAIL_LINE_CHARS = 400;

/**
 * Starts `node <script>` with its own environment (nothing inherited but PATH and HOME), keeps
 * the tail of its output, and registers its stop in `scope`.
 *
 * @param script - absolute path of a compiled .js file
 */
export function startChild(scope: Scope, name: string, script: string, options: StartOptions): Child {
  const execArgv = [
    ...(options.nodeArgs ?? []),
    ...(options.cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${options.cpuProfDir}`, `--cpu-prof-name=${name}-${Date.now()}.cpuprofile`] : []),
  ];
  const child = spawn(process.execPath, [...execArgv, script], {
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...options.env },
    stdio: options.ipc ? ['ignore', 'pipe', 'pipe', 'ipc'] : ['ignore', 'pipe', 'pipe'],
  });
  if (child.pid === undefined) throw new Error(`cannot start ${name} (${path.basename(script)})`);
  const tail: string[] = [];
  const keep = (chunk: Buffer) => {
    tail.push(...chunk.toString('utf8').split('\n').filter(Boolean).map((line) => line.slice(0, TAIL_LINE_CHARS)));
    tail.splice(0, Math.max(0, tail.length - TAIL_LINES));
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<void>((resolve) => {
    if (hasExited(child)) resolve();
    else child.once('exit', () => resolve());
  });
  const pid = child.pid;
  const handle: Child = {
    name,
    pid,
    process: child,
    rssBytes: () => readRss(pid),
    cpuSeconds: () => readCpuSeconds(pid),
    logTail: () => tail.join('\n'),
    async stop(graceMs = 15_000) {
      if (hasExited(child)) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
  scope.add(`process ${name}`, () => handle.stop());
  return handle;
}

/**
 * Polls `url` until it answers 2xx.
 *
 * @throws Error with the child's last output when the child exits first or `timeoutMs` passes
 */
export async function waitForHttp(child: Child, url: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (hasExited(child.process)) throw new Error(`${child.name} exited before ${url} answered:\n${child.logTail()}`);
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(1_000) });
      if (response.ok) return;
    } catch {
      // Not listening yet.
    }
    await sleep(100);
  }
  throw new Error(`${child.name}: ${url} did not answer 2xx within ${timeoutMs} ms:\n${child.logTail()}`);
}

/** Resolves with the first IPC message of a child (the bench's helper processes send one when ready). */
export function firstMessage<T>(child: Child, timeoutMs = 30_000): Promise<T> {
  return new Promise((resolve, reject) => {
    const done = () => {
      clearTimeout(timer);
      child.process.off('message', onMessage);
      child.process.off('exit', onExit);
    };
    const onMessage = (message: unknown) => {
      done();
      resolve(message as T);
    };
    const onExit = () => {
      done();
      reject(new Error(`${child.name} exited before it was ready:\n${child.logTail()}`));
    };
    const timer = setTimeout(() => {
      done();
      reject(new Error(`${child.name} sent no message within ${timeoutMs} ms:\n${child.logTail()}`));
    }, timeoutMs);
    child.process.on('message', onMessage);
    child.process.on('exit', onExit);
  });
}

/** Resident set size of a process, bytes; 0 when it is gone. */
export function readRss(pid: number): number {
  try {
    const match = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** Clock ticks per second of /proc/<pid>/stat times (USER_HZ, 100 on Linux). */
const USER_HZ = 100;

/** User plus system CPU time of a process, seconds; 0 when it is gone. */
export function readCpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name, which may hold spaces, start at field 3 (state): utime and stime are fields 14 and 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / USER_HZ;
  } catch {
    return 0;
  }
}

/** Promise of a delay, milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A compiled checkout of the project whose services and modules a run uses. */
export interface Build {
  /** How reports name it: `this checkout`, or the other checkout's commit. */
  name: string;
  /** Its compiled output folder (`<checkout>/dist`). */
  dist: string;
}

/** This checkout: this file is dist/bench/lib/children.js. */
export const THIS_BUILD: Build = { name: 'this checkout', dist: path.resolve(__dirname, '..', '..') };

/**
 * Another checkout of the project (BENCH_VERSUS), named by its commit, `+` when it has
 * uncommitted changes.
 *
 * @throws Error when the checkout has not been built (no dist/services/api/src/server.js)
 */
export function buildAt(checkout: string): Build {
  const dist = path.resolve(checkout, 'dist');
  if (!existsSync(path.join(dist, 'services', 'api', 'src', 'server.js'))) {
    throw new Error(`${checkout} has no build: run npm ci and npm run build there first`);
  }
  const git = (args: string[]) => execFileSync('git', ['-C', checkout, ...args], { encoding: 'utf8' }).trim();
  let name = path.basename(path.resolve(checkout));
  try {
    name = `${git(['rev-parse', '--short', 'HEAD'])}${git(['status', '--porcelain', '--untracked-files=no']) ? '+' : ''}`;
  } catch {
    // Not a git checkout: its folder name stands.
  }
  return { name, dist };
}

/** A compiled file of `build`, e.g. `buildPath(build, 'services', 'api', 'src', 'server.js')`. */
export function buildPath(build: Build, ...segments: string[]): string {
  return path.resolve(build.dist, ...segments);
}

/**
 * Loads a compiled module of `build`, which resolves its own dependencies from its checkout;
 * typed as this checkout's module of the same path, which the caller must only use as both
 * versions have it.
 */
export function requireFrom<T>(build: Build, ...segments: string[]): T {
  return require(buildPath(build, ...segments)) as T;
}

/** A compiled file of this checkout. */
export function distPath(...segments: string[]): string {
  return buildPath(THIS_BUILD, ...segments);
}

function hasExited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}
