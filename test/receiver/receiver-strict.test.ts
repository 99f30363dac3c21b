import { createHash, createHmac } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { Client } from 'pg';
import { buildApp } from '../../services/receiver/src/app';
import { newWebhookId, serializeEnvelope, signedHeaders } from '../../shared/webhook';
import { type TestEnvironment, createTestEnvironment } from '../support/environment';

const SECRET = 'whsec_c3RyaWN0LXJlY2VpdmVyLXRlc3Qtc2VjcmV0LTAx';
const ACCEPTED = { status: 200, json: { status: 'OK', message: 'Accepted' } };
const SERVER_ERROR = { status: 500, json: { status: 'ERROR', message: 'Server error' } };

let env: TestEnvironment;
let strict: FastifyInstance;
let lenient: FastifyInstance;
let strictUrl: string;
let lenientUrl: string;
let db: Client;

async function listen(app: FastifyInstance): Promise<string> {
  await app.listen({ host: '127.0.0.1', port: 0 });
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

beforeAll(async () => {
  env = await createTestEnvironment({ RECEIVER_SECRET: SECRET, RECEIVER_TOLERANCE_S: '60' }, 'receiver');
  strict = await buildApp(env.config);
  strictUrl = await listen(strict);
  lenient = await buildApp({ ...env.config, receiverAcceptXSignatureOnly: true });
  lenientUrl = await listen(lenient);
  db = new Client({ connectionString: env.databaseUrl });
  await db.connect();
});

afterAll(async () => {
  await db?.end();
  await strict?.close();
  await lenient?.close();
  await env?.cleanup();
});

interface Delivery {
  body: string;
  headers: Record<string, string>;
}

/**
 * A delivery as our worker sends it: X-Signature and the Standard Webhooks headers, one
 * secret; its timestamp `offsetS` seconds from now (signing time, so a slow request only
 * makes an old one older).
 */
function delivery(event: string, data: unknown, offsetS = 0): Delivery {
  const body = serializeEnvelope(data, { event, signable: true });
  const timestamp = Math.floor(Date.now() / 1000) + offsetS;
  return { body, headers: signedHeaders({ id: newWebhookId(), timestamp, body, secret: SECRET }) };
}

/** What an attacker replays: the captured bytes and X-Signature, the `webhook-*` headers stripped. */
function stripped({ body, headers }: Delivery): Delivery {
  return { body, headers: { 'Content-Type': headers['Content-Type'], 'X-Signature': headers['X-Signature'] } };
}

async function post(baseUrl: string, { body, headers }: Delivery): Promise<{ status: number; json: unknown }> {
  const response = await fetch(`${baseUrl}/webhooks/users`, { method: 'POST', headers, body });
  return { status: response.status, json: await response.json() };
}

async function userExists(userId: number): Promise<boolean> {
  const { rows } = await db.query('SELECT 1 FROM users WHERE user_id = $1', [userId]);
  return rows.length === 1;
}

async function inboxCount(): Promise<number> {
  const { rows } = await db.query('SELECT count(*)::int AS n FROM webhook_inbox');
  return rows[0].n;
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

describe('strict receiver (default): Standard Webhooks headers required', () => {
  it('when a captured user.created is replayed with its webhook-* headers stripped after user.deleted, then 500 and the user stays deleted', async () => {
    const user = { user_id: 51001, name: 'Strict', email: 'strict51001@example.com' };
    const created = delivery('user.created', user);
    expect(await post(strictUrl, created)).toEqual(ACCEPTED);
    expect(await post(strictUrl, delivery('user.deleted', { user_id: user.user_id }))).toEqual(ACCEPTED);
    const inboxBefore = await inboxCount();

    expect(await post(strictUrl, stripped(created))).toEqual(SERVER_ERROR);

    expect(await userExists(user.user_id)).toBe(false);
    expect(await inboxCount()).toBe(inboxBefore);
  });

  it('when the reason is a missing header, then the answer does not echo it', async () => {
    const response = await fetch(`${strictUrl}/webhooks/users`, { method: 'POST', ...stripped(delivery('user.created', { user_id: 51002, email: 'x@example.com' })) });
    expect(await response.text()).toBe('{"status":"ERROR","message":"Server error"}');
  });

  // Margins keep it robust on a loaded machine: an "ahead" timestamp shrinks while the request travels.
  it('when RECEIVER_TOLERANCE_S is 60, then a timestamp 61 s old or 70 s ahead is refused and one 40 s old is accepted', async () => {
    expect(await post(strictUrl, delivery('user.created', { user_id: 51003, email: 'old@example.com' }, -61))).toEqual(SERVER_ERROR);
    expect(await post(strictUrl, delivery('user.created', { user_id: 51003, email: 'new@example.com' }, 70))).toEqual(SERVER_ERROR);
    expect(await userExists(51003)).toBe(false);
    expect(await post(strictUrl, delivery('user.created', { user_id: 51003, email: 'ok@example.com' }, -40))).toEqual(ACCEPTED);
    expect(await userExists(51003)).toBe(true);
  });
});

describe('RECEIVER_ACCEPT_X_SIGNATURE_ONLY=true: X-Signature alone accepted, every body deduped by its sha256', () => {
  it('when only X-Signature arrives (an independent node:crypto HMAC), then 200, the user exists and the inbox holds the body hash', async () => {
    const body = serializeEnvelope({ user_id: 52001, email: 'luminova52001@example.com' }, { event: 'user.registered', signable: true });
    const signature = createHmac('sha256', Buffer.from(SECRET, 'utf8')).update(Buffer.from(body, 'utf8')).digest('hex');

    expect(await post(lenientUrl, { body, headers: { 'Content-Type': 'application/json', 'X-Signature': signature } })).toEqual(ACCEPTED);

    expect(await userExists(52001)).toBe(true);
    const { rows } = await db.query('SELECT event, body_sha256 FROM webhook_inbox WHERE webhook_id = $1', [sha256(body)]);
    expect(rows).toEqual([{ event: 'user.registered', body_sha256: sha256(body) }]);
  });

  it('when user.created, user.deleted, then the stripped replay of the user.created arrive, then the replay is acknowledged but does not re-create the user', async () => {
    const user = { user_id: 52002, name: 'Replayed', email: 'replayed52002@example.com' };
    const created = delivery('user.created', user);
    expect(await post(lenientUrl, created)).toEqual(ACCEPTED);
    expect(await post(lenientUrl, delivery('user.deleted', { user_id: user.user_id }))).toEqual(ACCEPTED);

    expect(await post(lenientUrl, stripped(created))).toEqual(ACCEPTED);

    expect(await userExists(user.user_id)).toBe(false);
    const { rows } = await db.query('SELECT webhook_id FROM webhook_inbox WHERE body_sha256 = $1', [sha256(created.body)]);
    expect(rows).toEqual([{ webhook_id: created.headers['webhook-id'] }]);
  });

  it('when a body first seen in strict mode is replayed stripped to the lenient receiver, then it is not processed again', async () => {
    const user = { user_id: 52003, email: 'earlier52003@example.com' };
    const created = delivery('user.created', user);
    expect(await post(strictUrl, created)).toEqual(ACCEPTED);
    await db.query('DELETE FROM users WHERE user_id = $1', [user.user_id]);

    expect(await post(lenientUrl, stripped(created))).toEqual(ACCEPTED);

    expect(await userExists(user.user_id)).toBe(false);
  });

  it('when the same body arrives again under a new webhook-id, then it is acknowledged and not processed', async () => {
    const user = { user_id: 52004, email: 'twice52004@example.com' };
    const first = delivery('user.created', user);
    expect(await post(lenientUrl, first)).toEqual(ACCEPTED);
    await db.query('DELETE FROM users WHERE user_id = $1', [user.user_id]);

    const again = { body: first.body, headers: signedHeaders({ id: newWebhookId(), timestamp: Math.floor(Date.now() / 1000), body: first.body, secret: SECRET }) };
    expect(await post(lenientUrl, again)).toEqual(ACCEPTED);

    expect(await userExists(user.user_id)).toBe(false);
  });

  it('when X-Signature alone is wrong, then 500 even in this mode', async () => {
    const { body } = delivery('user.created', { user_id: 52005, email: 'forged@example.com' });
    expect(await post(lenientUrl, { body, headers: { 'Content-Type': 'application/json', 'X-Signature': 'ab'.repeat(32) } })).toEqual(SERVER_ERROR);
    expect(await userExists(52005)).toBe(false);
  });
});
