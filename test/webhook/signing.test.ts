import { createHmac } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import {
  EncryptionError,
  LogicError,
  deriveSecret,
  newWebhookId,
  serializeEnvelope,
  signHex,
  signStandard,
  signedHeaders,
  verifyHex,
  verifyStandard,
} from '../../shared/webhook';
import { reasonOf } from './support/reason-of';

// docs/design.md §7 golden vectors.
const LUMINOVA_SECRET = 'your-shared-secret';
const LUMINOVA_BODY =
  '{"_data":{"status":"OK","user":{"id":42,"email":"user@example.com"}},"_config":{"app.webhook.event":"user.registered","app.webhook.signable":1}}';
const LUMINOVA_SIGNATURE = '7a578c485cdeedd8e4f2ebf78d8e944abd81ef08cacff81f53e4104f539ac9a0';

const SW_SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const SW_ID = 'msg_p5jXN8AQM9LWM0D4loKWxJek';
const SW_TIMESTAMP = 1614265330;
const SW_BODY = '{"test": 2432232314}';
const SW_SIGNATURE = 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=';

function swHeaders(signature: string, timestamp = SW_TIMESTAMP, id = SW_ID): Record<string, string> {
  return { 'webhook-id': id, 'webhook-timestamp': String(timestamp), 'webhook-signature': signature };
}

describe('envelope', () => {
  it('when the golden payload is serialised with event then sign, then the bytes are the design vector', () => {
    const body = serializeEnvelope(
      { status: 'OK', user: { id: 42, email: 'user@example.com' } },
      { event: 'user.registered', signable: true },
    );
    expect(body).toBe(LUMINOVA_BODY);
  });

  it('when _config keys are given in another order, then they are written in that order', () => {
    expect(serializeEnvelope({ a: 1 }, { signable: true, event: 'x.y' })).toBe(
      '{"_data":{"a":1},"_config":{"app.webhook.signable":1,"app.webhook.event":"x.y"}}',
    );
  });

  it('when no config key is set, then _config is left out', () => {
    expect(serializeEnvelope({ a: 1 })).toBe('{"_data":{"a":1}}');
    expect(serializeEnvelope({ a: 1 }, { event: undefined, signable: false })).toBe('{"_data":{"a":1}}');
  });

  it('when the payload is a raw JSON string, then it is embedded as the JSON value it holds', () => {
    expect(serializeEnvelope('{"a": [1, 2], "b": "c"}', { signable: true })).toBe(
      '{"_data":{"a":[1,2],"b":"c"},"_config":{"app.webhook.signable":1}}',
    );
  });

  it('when the payload holds slashes and non-ASCII, then they stay literal as PHP writes them', () => {
    expect(serializeEnvelope({ url: 'https://x.test/a/b', name: 'Zoë 日本 😀', sep: '\u2028' })).toBe(
      '{"_data":{"url":"https://x.test/a/b","name":"Zoë 日本 😀","sep":"\\u2028"}}',
    );
  });

  it.each([
    ['undefined', undefined],
    ['null', null],
    ['an empty object', {}],
    ['an empty array', []],
    ['an empty string', ''],
    ['invalid JSON text', '{"a":'],
    ['a BigInt', { n: BigInt(1) }],
  ])('when the payload is %s, then EncryptionError', (_name, payload) => {
    expect(() => serializeEnvelope(payload)).toThrow(EncryptionError);
  });
});

describe('X-Signature (hex HMAC)', () => {
  it('when the golden body is signed, then the design vector comes out', () => {
    expect(signHex(LUMINOVA_BODY, LUMINOVA_SECRET)).toBe(LUMINOVA_SIGNATURE);
    expect(signHex(Buffer.from(LUMINOVA_BODY), LUMINOVA_SECRET, 'sha256')).toBe(LUMINOVA_SIGNATURE);
  });

  it.each(['sha256', 'sha384', 'sha512'] as const)('when signed with %s, then it equals an independent node:crypto HMAC', (algo) => {
    const body = '{"_data":{"name":"Zoë/ü"}}';
    const independent = createHmac(algo, Buffer.from('k€y', 'utf8')).update(Buffer.from(body, 'utf8')).digest('hex');
    expect(signHex(body, 'k€y', algo)).toBe(independent);
    expect(verifyHex(body, 'k€y', independent.toUpperCase(), algo)).toBe(true);
  });

  it.each(['md5', 'sha1', 'SHA256', ''])('when the algorithm is %p, then it is refused with LogicError', (algo) => {
    expect(reasonOf(() => signHex('x', 's', algo as never))).toMatch(/^LogicError: Unsupported HMAC algorithm/);
  });

  it('when the secret is empty, then LogicError', () => {
    expect(() => signHex('x', '')).toThrow(LogicError);
  });

  it.each([
    ['the golden signature', true, LUMINOVA_SIGNATURE],
    ['the signature in upper case', true, LUMINOVA_SIGNATURE.toUpperCase()],
    ['one changed digit', false, `${LUMINOVA_SIGNATURE.slice(0, -1)}1`],
    ['a truncated signature', false, LUMINOVA_SIGNATURE.slice(0, 63)],
    ['a non-hex signature', false, 'z'.repeat(64)],
    ['an empty string', false, ''],
    ['undefined', false, undefined],
    ['an array', false, [LUMINOVA_SIGNATURE]],
  ])('when verifying %s, then the answer is %p', (_name, expected, signature) => {
    expect(verifyHex(LUMINOVA_BODY, LUMINOVA_SECRET, signature)).toBe(expected);
  });

  it('when the body is tampered with or the secret is wrong, then false', () => {
    expect(verifyHex(LUMINOVA_BODY.replace('42', '43'), LUMINOVA_SECRET, LUMINOVA_SIGNATURE)).toBe(false);
    expect(verifyHex(LUMINOVA_BODY, 'another-secret', LUMINOVA_SIGNATURE)).toBe(false);
  });
});

describe('Standard Webhooks', () => {
  const at = { now: SW_TIMESTAMP };

  it('when the official vector is signed, then the official signature comes out', () => {
    expect(signStandard(SW_ID, SW_TIMESTAMP, SW_BODY, SW_SECRET)).toBe(SW_SIGNATURE);
  });

  it('when the official vector is verified, then the id and timestamp come back', () => {
    expect(verifyStandard(SW_BODY, swHeaders(SW_SIGNATURE), SW_SECRET, at)).toEqual({ id: SW_ID, timestamp: SW_TIMESTAMP });
  });

  it('when header names arrive in another case, then they are still found', () => {
    const headers = { 'Webhook-Id': SW_ID, 'WEBHOOK-TIMESTAMP': String(SW_TIMESTAMP), 'Webhook-Signature': SW_SIGNATURE };
    expect(verifyStandard(Buffer.from(SW_BODY), headers, SW_SECRET, at).id).toBe(SW_ID);
  });

  it.each([
    ['the body is tampered with', SW_BODY.replace('2432', '2433'), swHeaders(SW_SIGNATURE), SW_SECRET, /No matching signature/],
    ['the secret is wrong', SW_BODY, swHeaders(SW_SIGNATURE), 'whsec_c2VjcmV0LXR3bw==', /No matching signature/],
    ['the signature is truncated', SW_BODY, swHeaders(SW_SIGNATURE.slice(0, -4)), SW_SECRET, /No matching signature/],
    ['the signature is a bare v1,', SW_BODY, swHeaders('v1,'), SW_SECRET, /No matching signature/],
    ['the signature has no version', SW_BODY, swHeaders(SW_SIGNATURE.slice(3)), SW_SECRET, /No matching signature/],
    ['only an unknown version carries the right value', SW_BODY, swHeaders(`v2,${SW_SIGNATURE.slice(3)}`), SW_SECRET, /No matching signature/],
    ['the webhook-id differs', SW_BODY, swHeaders(SW_SIGNATURE, SW_TIMESTAMP, 'msg_other'), SW_SECRET, /No matching signature/],
    ['the signature header is missing', SW_BODY, { 'webhook-id': SW_ID, 'webhook-timestamp': String(SW_TIMESTAMP) }, SW_SECRET, /Missing required/],
    ['the timestamp is not a number', SW_BODY, { ...swHeaders(SW_SIGNATURE), 'webhook-timestamp': '16142x' }, SW_SECRET, /Invalid webhook-timestamp/],
  ])('when %s, then EncryptionError', (_name, body, headers, secret, reason) => {
    expect(reasonOf(() => verifyStandard(body, headers, secret, at))).toMatch(new RegExp(`^EncryptionError: .*${reason.source}`));
  });

  it('when several signatures are given and one matches, unknown versions among them, then it verifies', () => {
    const list = `v1a,xxx v2,${SW_SIGNATURE.slice(3)} v1,Ym9ndXM= ${SW_SIGNATURE}`;
    expect(verifyStandard(SW_BODY, swHeaders(list), SW_SECRET, at).id).toBe(SW_ID);
  });

  it('when the timestamp is just inside the window either way, then it verifies; one second outside, then too old / too new', () => {
    const signAt = (ts: number) => swHeaders(signStandard(SW_ID, ts, SW_BODY, SW_SECRET), ts);
    const now = SW_TIMESTAMP;
    expect(verifyStandard(SW_BODY, signAt(now - 300), SW_SECRET, { now }).id).toBe(SW_ID);
    expect(verifyStandard(SW_BODY, signAt(now + 300), SW_SECRET, { now }).id).toBe(SW_ID);
    expect(reasonOf(() => verifyStandard(SW_BODY, signAt(now - 301), SW_SECRET, { now }))).toBe('EncryptionError: Message timestamp too old.');
    expect(reasonOf(() => verifyStandard(SW_BODY, signAt(now + 301), SW_SECRET, { now }))).toBe('EncryptionError: Message timestamp too new.');
    expect(reasonOf(() => verifyStandard(SW_BODY, signAt(now - 20), SW_SECRET, { now, toleranceS: 10 }))).toMatch(/too old/);
  });

  it('when a secret rotates, then either secret verifies the space-separated list', () => {
    const next = 'whsec_bmV4dC1zZWNyZXQtZm9yLXJvdGF0aW9u';
    const headers = signedHeaders({ id: SW_ID, timestamp: SW_TIMESTAMP, body: SW_BODY, secret: next, additionalSecrets: [SW_SECRET] });
    expect(headers['webhook-signature'].split(' ')).toEqual([signStandard(SW_ID, SW_TIMESTAMP, SW_BODY, next), SW_SIGNATURE]);
    expect(verifyStandard(SW_BODY, headers, SW_SECRET, at).id).toBe(SW_ID);
    expect(verifyStandard(SW_BODY, headers, ['whsec_b2xk', next], at).id).toBe(SW_ID);
  });

  it('when the secret has no whsec_ prefix, then its UTF-8 bytes are the key', () => {
    const independent = createHmac('sha256', Buffer.from('plain-sécret', 'utf8')).update(`${SW_ID}.${SW_TIMESTAMP}.${SW_BODY}`).digest('base64');
    expect(signStandard(SW_ID, SW_TIMESTAMP, SW_BODY, 'plain-sécret')).toBe(`v1,${independent}`);
  });

  it('when a whsec_ secret is not base64 or the timestamp is not whole seconds, then LogicError', () => {
    expect(reasonOf(() => signStandard(SW_ID, SW_TIMESTAMP, SW_BODY, 'whsec_not*base64'))).toMatch(/^LogicError: Invalid secret/);
    expect(reasonOf(() => signStandard(SW_ID, SW_TIMESTAMP, SW_BODY, 'whsec_'))).toMatch(/^LogicError/);
    expect(reasonOf(() => signStandard(SW_ID, 1.5, SW_BODY, SW_SECRET))).toMatch(/^LogicError: Invalid webhook timestamp/);
  });
});

describe('interop with the standardwebhooks package', () => {
  const body = serializeEnvelope({ title: 'a/b', note: 'Zoë 日本' }, { event: 'post.created', signable: true });

  it('when we sign, then the standardwebhooks package verifies our headers and body', () => {
    const headers = signedHeaders({ id: newWebhookId(), timestamp: Math.floor(Date.now() / 1000), body, secret: SW_SECRET });
    expect(new Webhook(SW_SECRET).verify(body, headers)).toEqual(JSON.parse(body));
  });

  it('when the standardwebhooks package signs, then we verify', () => {
    const id = newWebhookId();
    const date = new Date();
    const signature = new Webhook(SW_SECRET).sign(id, date, body);
    const result = verifyStandard(Buffer.from(body), swHeaders(signature, Math.floor(date.getTime() / 1000), id), SW_SECRET);
    expect(result.id).toBe(id);
  });

  it('when it signs a different body, then we refuse it', () => {
    const id = newWebhookId();
    const date = new Date();
    const signature = new Webhook(SW_SECRET).sign(id, date, `${body} `);
    expect(() => verifyStandard(body, swHeaders(signature, Math.floor(date.getTime() / 1000), id), SW_SECRET)).toThrow(EncryptionError);
  });
});

describe('signedHeaders', () => {
  it('when given the golden inputs, then every docs/design.md §7 header is present with the vector values', () => {
    const headers = signedHeaders({ id: SW_ID, timestamp: SW_TIMESTAMP, body: LUMINOVA_BODY, secret: LUMINOVA_SECRET });
    expect(headers).toEqual({
      'Content-Type': 'application/json',
      'X-Signature': LUMINOVA_SIGNATURE,
      'webhook-id': SW_ID,
      'webhook-timestamp': String(SW_TIMESTAMP),
      'webhook-signature': signStandard(SW_ID, SW_TIMESTAMP, LUMINOVA_BODY, LUMINOVA_SECRET),
    });
  });

  it('when another header name and algorithm are configured, then the hex signature uses them', () => {
    const headers = signedHeaders({ id: SW_ID, timestamp: 1, body: 'b', secret: 's', algo: 'sha512', signatureHeader: 'X-Hub-Sig' });
    expect(headers['X-Hub-Sig']).toBe(createHmac('sha512', 's').update('b').digest('hex'));
    expect(headers['X-Signature']).toBeUndefined();
  });
});

describe('deriveSecret and newWebhookId', () => {
  it('when deriving, then it is hex HMAC(key = app key, message = salt)', () => {
    expect(deriveSecret('app-key', 'app.webhook.salt')).toBe(createHmac('sha256', 'app-key').update('app.webhook.salt').digest('hex'));
    expect(deriveSecret('app-key', 'app.webhook.salt', 'sha512')).toHaveLength(128);
    expect(() => deriveSecret('', 'salt')).toThrow(LogicError);
  });

  it('when ids are generated, then they are unique, prefixed, free of ":" and never all digits', () => {
    const ids = new Set(Array.from({ length: 1000 }, () => newWebhookId()));
    expect(ids.size).toBe(1000);
    for (const id of ids) expect(id).toMatch(/^msg_[A-Za-z0-9_-]{22}$/);
  });
});
