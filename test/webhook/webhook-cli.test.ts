import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { runWebhookCli } from '../../scripts/webhook-cli';
import { signHex } from '../../shared/webhook';
import { type TestEnvironment, createTestEnvironment, processEnv } from '../support/environment';
import { type ForwardProxy, startForwardProxy } from '../support/forward-proxy';
import { ROOT, freePort } from '../support/processes';
import { type RecordingServer, startRecordingServer } from '../support/recording-server';
import { createProducer, type Producer, resetAndClose, startWorker } from '../worker/support/harness';

let server: RecordingServer;

beforeEach(async () => {
  server = await startRecordingServer();
});

afterEach(async () => {
  await server.close();
});

async function run(args: string[], env: NodeJS.ProcessEnv = { NODE_ENV: 'test' }): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runWebhookCli(args, { out: (text) => (out += text), err: (text) => (err += text) }, env);
  return { code, out, err };
}

describe('npm run webhook -- send', () => {
  it('when given url, event, data and secret, then one signed webhook is sent and a JSON line describes it', async () => {
    const result = await run(['send', '--url', `${server.url}/in`, '--event', 'user.created', '--data', '{"user_id": 5, "name": "Zoë/ü"}', '--secret', 's3cret']);

    expect(result.code).toBe(0);
    const [request] = server.requests;
    expect(request.body.toString()).toBe('{"_data":{"user_id":5,"name":"Zoë/ü"},"_config":{"app.webhook.event":"user.created","app.webhook.signable":1}}');
    expect(request.headers['x-signature']).toBe(signHex(request.body, 's3cret'));
    expect(JSON.parse(result.out)).toEqual({
      id: request.headers['webhook-id'],
      status: 200,
      signature: request.headers['x-signature'],
      response: { ok: true },
    });
  });

  it('when the endpoint answers 500, then exit code 1 and the status on stderr', async () => {
    server.setReply({ status: 500 });
    const result = await run(['send', '--url', server.url, '--event', 'x.y', '--data', '{"a":1}', '--secret', 's']);
    expect(result.code).toBe(1);
    expect(JSON.parse(result.err)).toMatchObject({ error: 'RequestError', status: 500 });
  });

  it.each([
    ['no command', ['--url', 'http://127.0.0.1:9', '--event', 'x', '--data', '{}']],
    ['a missing --event', ['send', '--url', 'http://127.0.0.1:9', '--data', '{"a":1}']],
    ['an unknown option', ['send', '--url', 'http://127.0.0.1:9', '--event', 'x', '--data', '{"a":1}', '--bogus', '1']],
  ])('when given %s, then exit code 2 with the usage and nothing is sent', async (_name, args) => {
    const result = await run(args);
    expect(result.code).toBe(2);
    expect(result.err).toContain('usage: npm run webhook -- send');
    expect(server.requests).toHaveLength(0);
  });

  it.each([
    ['--data that is not JSON', ['--data', '{"a":'], /not valid JSON/],
    ['an unsupported --algo', ['--data', '{"a":1}', '--algo', 'md5'], /Unsupported HMAC algorithm/],
    ['a --timeout that is not a number', ['--data', '{"a":1}', '--timeout', 'soon'], /Invalid timeout/],
  ])('when given %s, then exit code 2 with the reason and nothing is sent', async (_name, extra, reason) => {
    const result = await run(['send', '--url', server.url, '--event', 'x.y', '--secret', 's', ...extra]);
    expect(result.code).toBe(2);
    expect(result.err).toMatch(reason);
    expect(server.requests).toHaveLength(0);
  });
});

describe('npm run webhook -- send, with WEBHOOK_PROXY_URL (docs/design.md §14.2)', () => {
  let proxy: ForwardProxy;

  beforeEach(async () => {
    proxy = await startForwardProxy({ credentials: 'egress:p@ss' });
  });

  afterEach(async () => {
    await proxy.close();
  });

  const args = () => ['send', '--url', `${server.url}/in`, '--event', 'x.y', '--data', '{"a":1}', '--secret', 's3cret'];

  it('when run as a process, then the webhook leaves through the proxy with its credentials, and the process exits by itself', async () => {
    const script = path.join(ROOT, 'dist', 'scripts', 'webhook-cli.js');
    const env = { ...process.env, NODE_ENV: 'test', WEBHOOK_PROXY_URL: `http://egress:p%40ss@127.0.0.1:${proxy.port}` };

    // Anything left open that holds the event loop would keep the process alive until the timeout kills it.
    const { stdout } = await promisify(execFile)(process.execPath, [script, ...args()], { cwd: ROOT, env, timeout: 15_000 });

    const [request] = server.requests;
    expect(JSON.parse(stdout)).toMatchObject({ id: request.headers['webhook-id'], status: 200 });
    expect(request.headers['x-signature']).toBe(signHex(request.body, 's3cret'));
    expect(proxy.requests).toEqual([{ method: 'POST', target: `${server.url}/in`, proxyAuthorization: `Basic ${Buffer.from('egress:p@ss').toString('base64')}` }]);
  });

  it('when WEBHOOK_NO_PROXY lists the target, then it is sent directly', async () => {
    const result = await run(args(), { NODE_ENV: 'test', WEBHOOK_PROXY_URL: proxy.url, WEBHOOK_NO_PROXY: '127.0.0.0/8' });

    expect(result.code).toBe(0);
    expect(server.requests).toHaveLength(1);
    expect(proxy.requests).toHaveLength(0);
  });

  it('when the proxy refuses the credentials, then exit code 1 with its 407, and the credentials are not printed', async () => {
    const result = await run(args(), { NODE_ENV: 'test', WEBHOOK_PROXY_URL: `http://egress:wrong-pass@127.0.0.1:${proxy.port}` });

    expect(result.code).toBe(1);
    expect(JSON.parse(result.err)).toMatchObject({ error: 'RequestError', status: 407 });
    expect(result.err + result.out).not.toContain('wrong-pass');
    expect(server.requests).toHaveLength(0);
  });
});

describe('npm run webhook -- send --queue', () => {
  let env: TestEnvironment;
  let cliEnv: NodeJS.ProcessEnv;
  let producer: Producer;
  let running: ReturnType<typeof startWorker>;

  beforeAll(async () => {
    env = await createTestEnvironment({}, 'worker');
    cliEnv = processEnv(env);
  });

  beforeEach(async () => {
    producer = createProducer(env.config);
    await producer.queue.waitUntilReady();
    running = startWorker(env.config, producer.db);
  });

  afterEach(async () => {
    await running.close();
    await resetAndClose(producer);
  });

  afterAll(async () => {
    await env.cleanup();
  });

  it('when given --queue, then it prints the delivery id and the worker delivers the signed envelope under that webhook-id', async () => {
    const result = await run(['send', '--url', `${server.url}/in`, '--event', 'user.created', '--data', '{"user_id": 5}', '--secret', 's3cret', '--queue'], cliEnv);

    expect(result.code).toBe(0);
    const printed = JSON.parse(result.out);
    expect(printed).toEqual({ id: expect.stringMatching(/^msg_/), queued: true });
    const [request] = await server.waitForRequests(1);
    expect(request.headers['webhook-id']).toBe(printed.id);
    expect(request.body.toString()).toBe('{"_data":{"user_id":5},"_config":{"app.webhook.event":"user.created","app.webhook.signable":1}}');
    expect(request.headers['x-signature']).toBe(signHex(request.body, 's3cret'));
  });

  it('when run as a process with --queue, then it exits by itself once the id is printed', async () => {
    const script = path.join(ROOT, 'dist', 'scripts', 'webhook-cli.js');
    const args = ['send', '--url', `${server.url}/in`, '--event', 'x.y', '--data', '{"a":1}', '--secret', 's', '--queue'];

    // A connection left open would keep the process alive until the timeout kills it.
    const { stdout } = await promisify(execFile)(process.execPath, [script, ...args], { cwd: ROOT, env: { ...process.env, ...cliEnv }, timeout: 15_000 });

    const { id } = JSON.parse(stdout);
    const [request] = await server.waitForRequests(1);
    expect(request.headers['webhook-id']).toBe(id);
  });

  it.each([
    ['--field', ['--field', 'query'], /--field and --timeout/],
    ['--timeout', ['--timeout', '5'], /--field and --timeout/],
    ['a URL that is not http(s)', ['--url', 'ftp://127.0.0.1/in'], /InvalidWebhookError/],
    ['--method GET', ['--method', 'GET'], /InvalidWebhookError/],
    ['--data that is not JSON', ['--data', '{"a":'], /EncryptionError/],
  ])('when given %s with --queue, then exit code 2 with the reason and nothing is stored', async (_name, extra, reason) => {
    const base = { '--url': `${server.url}/in`, '--event': 'x.y', '--data': '{"a":1}' } as Record<string, string>;
    for (let i = 0; i < extra.length; i += 2) base[extra[i]] = extra[i + 1];
    const result = await run(['send', ...Object.entries(base).flat(), '--queue'], cliEnv);

    expect(result.code).toBe(2);
    expect(result.err).toMatch(reason);
    expect(await producer.db.models.WebhookDelivery.count()).toBe(0);
  });

  it('when PostgreSQL is unreachable, then exit code 1 and the error on stderr', async () => {
    const closed = `postgres://postgres:postgres@127.0.0.1:${await freePort()}/none`;
    const result = await run(['send', '--url', `${server.url}/in`, '--event', 'x.y', '--data', '{"a":1}', '--queue'], { ...cliEnv, DATABASE_URL: closed });

    expect(result.code).toBe(1);
    expect(JSON.parse(result.err)).toMatchObject({ error: expect.stringMatching(/Connection/) });
    expect(result.out).toBe('');
  });
});
