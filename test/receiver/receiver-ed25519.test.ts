import { createHmac } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import nacl from 'tweetnacl';
import { buildApp } from '../../services/receiver/src/app';
import { loadConfig } from '../../shared/config';
import { newWebhookId, serializeEnvelope } from '../../shared/webhook/signing';
import { verifyIncoming } from '../../shared/webhook/verify-incoming';
import { type TestEnvironment, createTestEnvironment } from '../support/environment';

const SENDER = nacl.sign.keyPair.fromSeed(Buffer.alloc(32, 7));
const PUBLIC_KEY = `whpk_${Buffer.from(SENDER.publicKey).toString('base64')}`;
const HMAC_SECRET = 'whsec_bmV3LXJlY2VpdmVyLXNlY3JldC0wMTIzNDU2Nzg5';

/** docs/design.md §14.1: RECEIVER_SECRET may list `whpk_` keys, which verify Standard Webhooks `v1a` deliveries. */
describe('receiver: ed25519 public keys in RECEIVER_SECRET', () => {
  let env: TestEnvironment;
  let app: FastifyInstance;
  let baseUrl: string;
  let nextPid = 700;

  beforeAll(async () => {
    env = await createTestEnvironment({ RECEIVER_SECRET: `${PUBLIC_KEY} ${HMAC_SECRET}` }, 'receiver');
    app = await buildApp(env.config);
    await app.listen({ host: '127.0.0.1', port: 0 });
    baseUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await app?.close();
    await env?.cleanup();
  });

  /** A post event signed `v1a` by tweetnacl with `secretKey`, as another sender would. */
  function signed(secretKey: Uint8Array): { body: string; headers: Record<string, string> } {
    nextPid += 1;
    const body = serializeEnvelope({ pid: nextPid }, { event: 'post.created', signable: true });
    const id = newWebhookId();
    const timestamp = String(Math.floor(Date.now() / 1000));
    const signature = Buffer.from(nacl.sign.detached(Buffer.from(`${id}.${timestamp}.${body}`, 'utf8'), secretKey)).toString('base64');
    return { body, headers: { 'content-type': 'application/json', 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': `v1a,${signature}` } };
  }

  const post = async ({ body, headers }: { body: string; headers: Record<string, string> }) => {
    const response = await fetch(`${baseUrl}/webhooks/posts`, { method: 'POST', headers, body });
    return { status: response.status, json: await response.json() };
  };

  it('when a v1a delivery is signed by the listed key, then it is accepted without X-Signature', async () => {
    expect(await post(signed(SENDER.secretKey))).toEqual({ status: 200, json: { status: 'OK', message: 'Accepted' } });
  });

  it("when a v1a delivery is signed by another key or its body changed, then it is refused with the spec's 500 and not recorded", async () => {
    const refused = { status: 500, json: { status: 'ERROR', message: 'Server error' } };
    const forged = signed(nacl.sign.keyPair().secretKey);
    expect(await post(forged)).toEqual(refused);
    const tampered = signed(SENDER.secretKey);
    expect(await post({ ...tampered, body: tampered.body.replace('"pid":', '"pid": ') })).toEqual(refused);
    const [rows] = await app.db.sequelize.query('SELECT webhook_id FROM webhook_inbox WHERE webhook_id = ANY($1::text[])', {
      bind: [[forged.headers['webhook-id'], tampered.headers['webhook-id']]],
    });
    expect(rows).toEqual([]);
  });

  it('when X-Signature alone is accepted, then the public key never verifies an HMAC, so knowing it forges nothing', () => {
    const body = serializeEnvelope({ pid: 1 }, { event: 'post.created', signable: true });
    const forged = createHmac('sha256', PUBLIC_KEY).update(body).digest('hex');
    expect(() => verifyIncoming(Buffer.from(body), { 'x-signature': forged }, { secret: [PUBLIC_KEY], acceptXSignatureOnly: true })).toThrow('Signature mismatch');
  });

  it('when RECEIVER_SECRET lists a whpk_ key that is not 32 bytes of base64, then the configuration is refused at start', () => {
    expect(() => loadConfig({ NODE_ENV: 'test', RECEIVER_SECRET: 'whpk_c2hvcnQ=' }, 'receiver')).toThrow('a whpk_ public key must be followed by the base64 of 32 bytes');
  });
});
