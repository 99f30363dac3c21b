import { runWebhookCli } from '../../scripts/webhook-cli';
import { signHex } from '../../shared/webhook';
import { type RecordingServer, startRecordingServer } from '../support/recording-server';

let server: RecordingServer;

beforeEach(async () => {
  server = await startRecordingServer();
});

afterEach(async () => {
  await server.close();
});

async function run(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runWebhookCli(args, { out: (text) => (out += text), err: (text) => (err += text) }, { NODE_ENV: 'test' });
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
    expect(result.err).toContain('Usage: npm run webhook -- send');
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
