import { createHmac } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { Webhook } from 'standardwebhooks';
import { buildApp } from '../../services/receiver/src/app';
import { loadConfig } from '../../shared/config';
import { newWebhookId, serializeEnvelope, signedHeaders } from '../../shared/webhook/signing';
import { type TestEnvironment, createTestEnvironment } from '../support/environment';

const NEW_SECRET = 'whsec_bmV3LXJlY2VpdmVyLXNlY3JldC0wMTIzNDU2Nzg5';
const OLD_SECRET = 'whsec_b2xkLXJlY2VpdmVyLXNlY3JldC0wMTIzNDU2Nzg5';
const THIRD_SECRET = 'whsec_dGhpcmQtcmVjZWl2ZXItc2VjcmV0LTAxMjM0NTY3ODk=';
const ACCEPTED = { status: 'OK', message: 'Accepted' };
const SERVER_ERROR = { status: 'ERROR', message: 'Server error' };

describe('receiver: several secrets in RECEIVER_SECRET', () => {
  let env: TestEnvironment;
  let app: FastifyInstance;
  let baseUrl: string;
  let nextPid = 500;

  beforeAll(async () => {
    // X-Signature alone is accepted here, so both schemes' rotation is covered.
    env = await createTestEnvironment({ RECEIVER_SECRET: `${NEW_SECRET} ${OLD_SECRET}`, RECEIVER_ACCEPT_X_SIGNATURE_ONLY: 'true' }, 'receiver');
    app = await buildApp(env.config);
    await app.listen({ host: '127.0.0.1', port: 0 });
    baseUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await app?.close();
    await env?.cleanup();
  });

  /** A fresh post event body, so no two requests are deduped against each other. */
  function postEvent(): string {
    nextPid += 1;
    return serializeEnvelope({ pid: nextPid }, { event: 'post.created', signable: true });
  }

  async function post(body: string, headers: Record<string, string>): Promise<{ status: number; json: unknown }> {
    const response = await fetch(`${baseUrl}/webhooks/posts`, { method: 'POST', headers, body });
    return { status: response.status, json: await response.json() };
  }

  /** Standard Webhooks headers signed with the official library, one `v1` entry per secret. */
  function standardHeaders(body: string, ...secrets: string[]): Record<string, string> {
    const id = newWebhookId();
    const timestamp = new Date();
    const signatures = secrets.map((secret) => new Webhook(secret).sign(id, timestamp, body));
    return {
      'content-type': 'application/json',
      'webhook-id': id,
      'webhook-timestamp': String(Math.floor(timestamp.getTime() / 1000)),
      'webhook-signature': signatures.join(' '),
    };
  }

  function hexHeaders(body: string, secret: string): Record<string, string> {
    return { 'content-type': 'application/json', 'x-signature': createHmac('sha256', secret).update(body).digest('hex') };
  }

  it('When RECEIVER_SECRET lists two secrets, then the config holds both, newest first', () => {
    expect(env.config.receiverSecrets).toEqual([NEW_SECRET, OLD_SECRET]);
  });

  it.each([
    ['the new secret', NEW_SECRET],
    ['the old secret', OLD_SECRET],
  ])('When a Standard Webhooks webhook is signed with %s, then it is accepted', async (_name, secret) => {
    const body = postEvent();

    expect(await post(body, standardHeaders(body, secret))).toEqual({ status: 200, json: ACCEPTED });
  });

  it.each([
    ['the new secret', NEW_SECRET],
    ['the old secret', OLD_SECRET],
  ])('When X-Signature-only webhooks are accepted and one is signed with %s, then it is accepted', async (_name, secret) => {
    const body = postEvent();

    expect(await post(body, hexHeaders(body, secret))).toEqual({ status: 200, json: ACCEPTED });
  });

  it('When a sender mid-rotation lists an unknown secret\'s signature before the old one\'s, then the old one is enough', async () => {
    const body = postEvent();

    expect(await post(body, standardHeaders(body, THIRD_SECRET, OLD_SECRET))).toEqual({ status: 200, json: ACCEPTED });
  });

  it('When a worker signs with a current and a previous secret, then the receiver accepts its headers as they are', async () => {
    const body = postEvent();
    const headers = signedHeaders({
      id: newWebhookId(),
      timestamp: Math.floor(Date.now() / 1000),
      body,
      secret: THIRD_SECRET,
      additionalSecrets: [NEW_SECRET],
    });

    expect(await post(body, headers)).toEqual({ status: 200, json: ACCEPTED });
  });

  it('When a webhook is signed with a third secret, then both schemes refuse it with the spec\'s 500', async () => {
    const standard = postEvent();
    const hex = postEvent();

    expect(await post(standard, standardHeaders(standard, THIRD_SECRET))).toEqual({ status: 500, json: SERVER_ERROR });
    expect(await post(hex, hexHeaders(hex, THIRD_SECRET))).toEqual({ status: 500, json: SERVER_ERROR });
  });
});

describe('config: RECEIVER_SECRET lists', () => {
  const load = (secret: string) => loadConfig({ NODE_ENV: 'test', RECEIVER_SECRET: secret }, 'receiver');

  it('When the secrets are separated by any whitespace, then each one is kept in order', () => {
    expect(load(`\n ${NEW_SECRET}\t ${OLD_SECRET}\n`).receiverSecrets).toEqual([NEW_SECRET, OLD_SECRET]);
    expect(load('one-plain-secret').receiverSecrets).toEqual(['one-plain-secret']);
  });

  it.each([
    [`${NEW_SECRET} short`, /RECEIVER_SECRET.*at least 8 characters/],
    [`${NEW_SECRET} whsec_not*base64`, /RECEIVER_SECRET.*whsec_ secret must be followed by base64/],
    ['   ', /RECEIVER_SECRET/],
  ])('When RECEIVER_SECRET is %j, then loading fails naming the variable', (secret, message) => {
    expect(() => load(secret)).toThrow(message);
  });

  it('When RECEIVER_SECRET is not set outside production, then the dev default is the only secret', () => {
    const config = loadConfig({ NODE_ENV: 'test' }, 'receiver');

    expect(config.receiverSecrets).toHaveLength(1);
    expect(config.warnings.join('\n')).toMatch(/RECEIVER_SECRET/);
  });
});
