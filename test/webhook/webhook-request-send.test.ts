import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import {
  DEFAULT_MAX_RESPONSE_BYTES,
  EncryptionError,
  LogicError,
  RequestError,
  WebhookRequest,
  deriveSecret,
  serializeEnvelope,
  signHex,
} from '../../shared/webhook';
import { type RecordingServer, startRecordingServer } from '../support/recording-server';

const SECRET = 'your-shared-secret';
const GOLDEN_DATA = { status: 'OK', user: { id: 42, email: 'user@example.com' } };
const GOLDEN_BODY =
  '{"_data":{"status":"OK","user":{"id":42,"email":"user@example.com"}},"_config":{"app.webhook.event":"user.registered","app.webhook.signable":1}}';

let server: RecordingServer;

beforeEach(async () => {
  server = await startRecordingServer();
});

afterEach(async () => {
  await server.close();
});

async function captureError(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a rejection');
}

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

describe('WebhookRequest.send, field body', () => {
  it('when the golden payload is signed and posted, then the bytes and X-Signature are the design vectors', async () => {
    const hook = new WebhookRequest(`${server.url}/hooks/users`).setPayload(GOLDEN_DATA).setSecret(SECRET).setEvent('user.registered').sign();

    const response = await hook.send();

    expect(response.status).toBe(200);
    const [request] = server.requests;
    expect(request.method).toBe('POST');
    expect(request.path).toBe('/hooks/users');
    expect(request.headers['content-type']).toBe('application/json');
    expect(request.body.toString('utf8')).toBe(GOLDEN_BODY);
    expect(request.headers['x-signature']).toBe('7a578c485cdeedd8e4f2ebf78d8e944abd81ef08cacff81f53e4104f539ac9a0');
    expect(hook.getSignature()).toBe(request.headers['x-signature']);
    expect(request.headers['webhook-id']).toBe(hook.getWebhookId());
  });

  it('when sent, then the standardwebhooks package verifies the Standard Webhooks headers over the received bytes', async () => {
    const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
    await new WebhookRequest(server.url, 'put').setPayload({ path: '/a/b', name: 'Zoë 日本' }).setEvent('post.updated').sign(secret).send();

    const [request] = server.requests;
    expect(request.method).toBe('PUT');
    expect(request.body.toString('utf8')).toBe(
      '{"_data":{"path":"/a/b","name":"Zoë 日本"},"_config":{"app.webhook.event":"post.updated","app.webhook.signable":1}}',
    );
    const headers = request.headers as Record<string, string>;
    expect(new Webhook(secret).verify(request.body.toString('utf8'), headers)).toEqual(JSON.parse(request.body.toString('utf8')));
  });

  it('when sign() is called before setEvent(), then _config keys follow the call order', async () => {
    await new WebhookRequest(server.url).setPayload('{"a": 1}').sign(SECRET).setEvent('x.y').send();
    expect(server.requests[0].body.toString()).toBe('{"_data":{"a":1},"_config":{"app.webhook.signable":1,"app.webhook.event":"x.y"}}');
  });

  it('when another algorithm and header name are set, then the signature uses them', async () => {
    await new WebhookRequest(server.url).setPayload({ a: 1 }).setAlgo('sha512').setSignatureHeader('X-Hub-Signature').sign(SECRET).send();
    const [request] = server.requests;
    expect(request.headers['x-hub-signature']).toBe(signHex(request.body, SECRET, 'sha512'));
    expect(request.headers['x-signature']).toBeUndefined();
  });

  it('when not signed, then the envelope is sent without signature headers or signable flag', async () => {
    await new WebhookRequest(server.url).setPayload({ a: 1 }).setEvent('x.y').setHeaders({ 'X-App-Token': 'abc' }).send();
    const [request] = server.requests;
    expect(request.body.toString()).toBe('{"_data":{"a":1},"_config":{"app.webhook.event":"x.y"}}');
    expect(request.headers['x-app-token']).toBe('abc');
    expect(request.headers['x-signature']).toBeUndefined();
    expect(request.headers['webhook-signature']).toBeUndefined();
  });
});

describe('WebhookRequest.send, other fields', () => {
  const data = { title: 'a b/c', tags: ['x', 'ü'], ok: true, none: null };

  it('when the method is GET and no field is given, then the payload travels in the query string, which is what is signed', async () => {
    await new WebhookRequest(`${server.url}/hook?v=1`, 'GET').setPayload(data).setEvent('post.created').sign(SECRET).send();

    const [request] = server.requests;
    expect(request.method).toBe('GET');
    expect(request.body.length).toBe(0);
    expect(request.query).toEqual({
      v: '1',
      '_data[title]': 'a b/c',
      '_data[tags][0]': 'x',
      '_data[tags][1]': 'ü',
      '_data[ok]': '1',
      '_config[app.webhook.event]': 'post.created',
      '_config[app.webhook.signable]': '1',
    });
    const signed = request.rawQuery.slice('v=1&'.length);
    expect(request.headers['x-signature']).toBe(signHex(signed, SECRET));
  });

  it('when the field is form_params, then an urlencoded body is sent and its bytes are signed', async () => {
    await new WebhookRequest(server.url).setPayload(data).sign(SECRET).send('form_params');

    const [request] = server.requests;
    expect(request.headers['content-type']).toBe('application/x-www-form-urlencoded');
    expect(Object.fromEntries(new URLSearchParams(request.body.toString()))).toEqual({
      '_data[title]': 'a b/c',
      '_data[tags][0]': 'x',
      '_data[tags][1]': 'ü',
      '_data[ok]': '1',
      '_config[app.webhook.signable]': '1',
    });
    expect(request.headers['x-signature']).toBe(signHex(request.body, SECRET));
  });

  it('when the field is multipart, then a multipart/form-data body is sent and its bytes are signed', async () => {
    await new WebhookRequest(server.url).setPayload(data).sign(SECRET).send('multipart');

    const [request] = server.requests;
    const contentType = String(request.headers['content-type']);
    expect(contentType).toMatch(/^multipart\/form-data; boundary=\S+$/);
    const form = await new Response(request.body, { headers: { 'content-type': contentType } }).formData();
    expect([...form.entries()]).toEqual([
      ['_data[title]', 'a b/c'],
      ['_data[tags][0]', 'x'],
      ['_data[tags][1]', 'ü'],
      ['_data[ok]', '1'],
      ['_config[app.webhook.signable]', '1'],
    ]);
    expect(request.headers['x-signature']).toBe(signHex(request.body, SECRET));
  });

  it('when the field is body on a DELETE, then the JSON envelope is the body', async () => {
    await new WebhookRequest(server.url, 'DELETE').setPayload({ pid: 7 }).sign(SECRET).send('body');
    expect(server.requests[0].method).toBe('DELETE');
    expect(server.requests[0].body.toString()).toBe(serializeEnvelope({ pid: 7 }, { signable: true }));
  });

  it('when the field is unknown, then LogicError and nothing is sent', async () => {
    const error = await captureError(new WebhookRequest(server.url).setPayload({ a: 1 }).send('json' as never));
    expect(error).toBeInstanceOf(LogicError);
    expect(server.requests).toHaveLength(0);
  });
});

describe('WebhookRequest.send, failures', () => {
  it('when the endpoint answers 500, then RequestError carries the status and response, without retrying', async () => {
    server.setReply({ status: 500, body: { error: 'boom' } });
    const error = await captureError(new WebhookRequest(server.url).setPayload({ a: 1 }).sign(SECRET).send());

    expect(error).toBeInstanceOf(RequestError);
    expect((error as RequestError).status).toBe(500);
    expect((error as RequestError).response?.data).toEqual({ error: 'boom' });
    expect(server.requests).toHaveLength(1);
  });

  it('when the endpoint redirects, then the redirect is not followed and RequestError carries 302', async () => {
    server.setReply({ status: 302, headers: { Location: `${server.url}/elsewhere` } });
    const error = await captureError(new WebhookRequest(server.url).setPayload({ a: 1 }).send());
    expect((error as RequestError).status).toBe(302);
    expect(server.requests.map((r) => r.path)).toEqual(['/']);
  });

  it('when the connection is refused, then RequestError with a null status and the transport error as cause', async () => {
    const port = await freePort();
    const error = await captureError(new WebhookRequest(`http://127.0.0.1:${port}/`).setPayload({ a: 1 }).sign(SECRET).send());

    expect(error).toBeInstanceOf(RequestError);
    expect((error as RequestError).status).toBeNull();
    expect((error as RequestError).response).toBeNull();
    expect((error.cause as { code?: string }).code).toBe('ECONNREFUSED');
  });

  it('when the connection is reset twice, then the third try succeeds with the same webhook-id', async () => {
    server.replyOnce({ reset: true });
    server.replyOnce({ reset: true });
    const response = await new WebhookRequest(server.url).setPayload({ a: 1 }).sign(SECRET).send();

    expect(response.status).toBe(200);
    expect(server.requests).toHaveLength(3);
    expect(new Set(server.requests.map((r) => r.headers['webhook-id'])).size).toBe(1);
  });

  it('when the connection is reset three times, then RequestError after one try and two retries', async () => {
    server.setReply({ reset: true });
    const error = await captureError(new WebhookRequest(server.url).setPayload({ a: 1 }).send());
    expect(error).toBeInstanceOf(RequestError);
    expect(server.requests).toHaveLength(3);
  });

  it('when the answer is slower than the timeout, then RequestError once the timeout passes', async () => {
    server.setReply({ delayMs: 2000 });
    const started = Date.now();
    const error = await captureError(new WebhookRequest(server.url, 'POST', 0.3).setPayload({ a: 1 }).send());

    expect(error).toBeInstanceOf(RequestError);
    expect((error as RequestError).status).toBeNull();
    expect(Date.now() - started).toBeLessThan(1500);
    expect(server.requests).toHaveLength(1);
  });

  it('when the answer is larger than the bound, then RequestError naming the bound; within it, the answer is read', async () => {
    server.setReply({ body: 'x'.repeat(2048) });
    const error = await captureError(new WebhookRequest(server.url).setMaxResponseBytes(1024).setPayload({ a: 1 }).send());
    expect(error).toBeInstanceOf(RequestError);
    expect(error.message).toBe('Webhook answer is larger than 1024 bytes.');

    const response = await new WebhookRequest(server.url, 'POST', 0, { maxResponseBytes: 2048 }).setPayload({ a: 1 }).send();
    expect(response.data).toBe('x'.repeat(2048));
  });

  it('when no bound is set, then an answer over 1 MiB is refused', async () => {
    server.setReply({ body: Buffer.alloc(1024 * 1024 + 1, 0x61) });
    const error = await captureError(new WebhookRequest(server.url).setPayload({ a: 1 }).send());
    expect(error).toBeInstanceOf(RequestError);
    expect(error.message).toBe(`Webhook answer is larger than ${DEFAULT_MAX_RESPONSE_BYTES} bytes.`);
    expect(DEFAULT_MAX_RESPONSE_BYTES).toBe(1024 * 1024);
  });

  it('when the timeout is 0, then a slow answer is awaited', async () => {
    server.setReply({ delayMs: 400 });
    const response = await new WebhookRequest(server.url).setTimeout(0).setPayload({ a: 1 }).send();
    expect(response.status).toBe(200);
  });

  it.each([
    ['no payload', undefined],
    ['an empty object', {}],
    ['an invalid raw JSON string', '{"a":'],
  ])('when signing %s, then EncryptionError and nothing is sent', async (_name, payload) => {
    const error = await captureError(new WebhookRequest(server.url).setPayload(payload).sign(SECRET).send());
    expect(error).toBeInstanceOf(EncryptionError);
    expect(server.requests).toHaveLength(0);
  });
});

describe('WebhookRequest, derived secret and state', () => {
  it('when signing without a secret, then it is derived from the app key and salt and readable after sending', async () => {
    const hook = new WebhookRequest(server.url, 'POST', 0, { appKey: 'app-key-0123456789', salt: 'salt-x' }).setPayload({ a: 1 }).sign();
    expect(hook.getSecret()).toBeNull();

    await hook.send();

    const expected = deriveSecret('app-key-0123456789', 'salt-x');
    expect(hook.getSecret()).toBe(expected);
    expect(server.requests[0].headers['x-signature']).toBe(signHex(server.requests[0].body, expected));
  });

  it('when no options are given, then APP_KEY and WEBHOOK_SALT come from the environment', async () => {
    const saved = { APP_KEY: process.env.APP_KEY, WEBHOOK_SALT: process.env.WEBHOOK_SALT };
    process.env.APP_KEY = 'env-app-key-0123456789';
    delete process.env.WEBHOOK_SALT;
    try {
      const hook = new WebhookRequest(server.url).setPayload({ a: 1 }).sign();
      await hook.send();
      expect(hook.getSecret()).toBe(deriveSecret('env-app-key-0123456789', 'app.webhook.salt'));
    } finally {
      for (const [key, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[key];
        else process.env[key] = value;
      }
    }
  });

  it('when payload keys are added, then getPayload returns the data, or the envelope with config', () => {
    const hook = new WebhookRequest(server.url);
    expect(hook.getPayload()).toBeNull();
    hook.setPayload('{"a":1}').addPayload('b', [2]).setEvent('x.y');
    expect(hook.getPayload()).toEqual({ a: 1, b: [2] });
    expect(hook.getPayload(true)).toEqual({ _data: { a: 1, b: [2] }, _config: { 'app.webhook.event': 'x.y' } });
    expect(new WebhookRequest('u').setPayload(['x']).addPayload('k', 1).getPayload()).toEqual({ 0: 'x', k: 1 });
    expect(new WebhookRequest('u').getSignature()).toBeNull();
  });

  it('when given a bad algorithm, method, timeout or header name, then LogicError at once', () => {
    const hook = new WebhookRequest(server.url);
    expect(() => hook.setAlgo('md5')).toThrow(LogicError);
    expect(() => hook.setMethod('PO ST')).toThrow(LogicError);
    expect(() => hook.setTimeout(-1)).toThrow(LogicError);
    expect(() => hook.setSignatureHeader('X Sig')).toThrow(LogicError);
    expect(() => hook.setMaxResponseBytes(0)).toThrow(LogicError);
  });

  it.each(['Host', 'content-type', 'Content-Length', 'Transfer-Encoding', 'Connection', 'Proxy-Authorization', 'webhook-id', 'Webhook-Timestamp', 'webhook-signature'])(
    'when the signature header is named %s (a reserved header), then LogicError',
    (name) => {
      const hook = new WebhookRequest(server.url);
      expect(() => hook.setSignatureHeader(name)).toThrow(new LogicError(`Invalid signature header name "${name}": it is a reserved header.`));
    },
  );

  it.each(['', 'X-Sig\r\nX-Injected: 1', 'X:Sig', 'Sig(1)'])('when the signature header name %j is not an HTTP token, then LogicError', (name) => {
    expect(() => new WebhookRequest(server.url).setSignatureHeader(name)).toThrow(/not an HTTP header token/);
  });

  it('when an allowed custom signature header name is set, then the signature travels under it', async () => {
    await new WebhookRequest(server.url).setSignatureHeader('X-Hub-Signature').setPayload({ a: 1 }).sign(SECRET).send();
    expect(server.requests[0].headers['x-hub-signature']).toBe(signHex(server.requests[0].body, SECRET));
    expect(server.requests[0].headers['x-signature']).toBeUndefined();
  });
});
