import { createServer, type Server } from 'node:net';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loggerOptions } from '../../shared/logging';
import { createTestEnvironment, TestEnvironment } from '../support/environment';
import { freePort, runScript, startService, type ServiceProcess } from '../support/processes';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy';
import { waitFor } from '../support/wait-for';

const API = 'dist/services/api/src/server.js';
const RECEIVER = 'dist/services/receiver/src/server.js';
const WORKER = 'dist/services/webhook-worker/src/main.js';

let env: TestEnvironment;
let base: Record<string, string>;

beforeAll(async () => {
  env = await createTestEnvironment();
  // The variables a developer leaves unset (APP_KEY, RECEIVER_SECRET) stay unset here.
  base = {
    NODE_ENV: 'development',
    LOG_LEVEL: 'info',
    DATABASE_URL: env.databaseUrl,
    REDIS_URL: env.redisUrl,
    REDIS_PREFIX: env.redisPrefix,
    HOST: '127.0.0.1',
    APP_KEY: '',
    RECEIVER_SECRET: '',
    UPLOAD_DIR: path.join(tmpdir(), 'start-up-logs-uploads'),
  };
});

afterAll(async () => {
  await env.cleanup();
});

/** The JSON log lines of a process's output whose message matches. */
function linesMatching(output: string, pattern: RegExp): { msg: string }[] {
  return output
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as { msg: string })
    .filter((line) => pattern.test(line.msg));
}

describe('start-up output', () => {
  let occupied: Server;
  let port: number;

  beforeAll(async () => {
    occupied = createServer();
    occupied.listen(0, '127.0.0.1');
    await once(occupied, 'listening');
    port = (occupied.address() as { port: number }).port;
  });

  afterAll(() => new Promise<void>((resolve) => occupied.close(() => resolve())));

  it.each([
    ['api', 'PORT', API],
    ['receiver', 'PORT', RECEIVER],
    ['webhook-worker', 'WORKER_METRICS_PORT', WORKER],
  ])('when the port of the %s is already in use, then it prints one line naming the port and %s, and exits 1', async (name, variable, script) => {
    const result = await runScript(script, [], { ...base, [variable]: String(port) });
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(`${name}: port ${port} is already in use (${variable}): stop the other process or set ${variable}\n`);
    expect(result.stdout).not.toMatch(/"stack"|at .*\(node:/);
  });

  it('when development defaults fill APP_KEY and RECEIVER_SECRET, then the api says so in one line', async () => {
    const port = await freePort();
    const api = await startService('api', API, { ...base, PORT: String(port) }, port);
    const output = api.output();
    await api.stop();
    expect(linesMatching(output, /not set/)).toEqual([
      expect.objectContaining({ msg: 'APP_KEY and RECEIVER_SECRET not set: using public development defaults. Never do this in production.' }),
    ]);
  });
});

describe('Redis outages in the log', () => {
  let proxy: TcpProxy;
  let viaProxy: string;

  beforeAll(async () => {
    const real = new URL(env.redisUrl);
    proxy = await startTcpProxy({ host: real.hostname, port: Number(real.port || 6379) });
    viaProxy = `redis://127.0.0.1:${proxy.port}`;
  });

  afterAll(async () => {
    await proxy.close();
  });

  it.each([
    ['api', API, 'PORT'],
    ['receiver', RECEIVER, 'PORT'],
    ['webhook-worker', WORKER, 'WORKER_METRICS_PORT'],
  ])('when Redis goes away for a few seconds and comes back, then the %s logs the outage once and its end once', async (name, script, variable) => {
    const port = await freePort();
    const service: ServiceProcess = await startService(name, script, { ...base, REDIS_URL: viaProxy, [variable]: String(port) }, port);
    try {
      await proxy.cut('refuse');
      // ioredis retries every 0.2 to 2 s: several failed reconnects happen in this time.
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      await proxy.restore();
      await waitFor(async () => linesMatching(service.output(), /reachable again/).length > 0, 10_000, 'the end of the outage in the log');
      expect(linesMatching(service.output(), /unreachable/)).toEqual([expect.objectContaining({ msg: expect.stringMatching(/^Redis at 127\.0\.0\.1:\d+ \(REDIS_URL\) unreachable, retrying/) })]);
      expect(linesMatching(service.output(), /reachable again/)).toEqual([expect.objectContaining({ msg: expect.stringMatching(/^Redis at 127\.0\.0\.1:\d+ \(REDIS_URL\) reachable again$/) })]);
    } finally {
      await proxy.restore();
      await service.stop();
    }
  });
});

describe('log format', () => {
  it('when the output is a terminal in development, then logs go through pino-pretty; otherwise they are JSON lines', () => {
    const dev = { logLevel: 'info', nodeEnv: 'development' };
    expect(loggerOptions(dev, undefined, { isTTY: true }).transport).toMatchObject({ target: 'pino-pretty', options: { colorize: true } });
    expect(loggerOptions(dev, undefined, { isTTY: false }).transport).toBeUndefined();
    expect(loggerOptions({ ...dev, nodeEnv: 'production' }, undefined, { isTTY: true }).transport).toBeUndefined();
  });
});
