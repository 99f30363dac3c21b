import { createHash, createHmac } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { Client } from 'pg';
import { Webhook } from 'standardwebhooks';
import { buildApp } from '../../services/receiver/src/app';
import { WebhookRequest, newWebhookId, serializeEnvelope, signedHeaders } from '../../shared/webhook';
import { type TestEnvironment, createTestEnvironment } from '../support/environment';

const SECRET = 'whsec_cmVjZWl2ZXItdGVzdC1zZWNyZXQtMDEyMzQ1Njc4OQ==';
const ACCEPTED = { status: 'OK', message: 'Accepted' };
const SERVER_ERROR = { status: 'ERROR', message: 'Server error' };

let env: TestEnvironment;
let app: FastifyInstance;
let baseUrl: string;
let db: Client;

beforeAll(async () => {
  env = await createTestEnvironment({ RECEIVER_SECRET: SECRET, RECEIVER_TOLERANCE_S: '300' }, 'receiver');
  app = await buildApp(env.config);
  await app.listen({ host: '127.0.0.1', port: 0 });
  baseUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  db = new Client({ connectionString: env.databaseUrl });
  await db.connect();
});

afterAll(async () => {
  await db?.end();
  await app?.close();
  await env?.cleanup();
});

interface Signed {
  body: string;
  headers: Record<string, string>;
}

/** A webhook as our worker sends it: the envelope and every docs/design.md §7 header. */
function signed(event: string, data: unknown, options: { id?: string; timestamp?: number; secret?: string } = {}): Signed {
  const body = serializeEnvelope(data, { event, signable: true });
  const headers = signedHeaders({
    id: options.id ?? newWebhookId(),
    timestamp: options.timestamp ?? Math.floor(Date.now() / 1000),
    body,
    secret: options.secret ?? SECRET,
  });
  return { body, headers };
}

async function post(path: string, { body, headers }: Signed): Promise<{ status: number; json: unknown }> {
  const response = await fetch(`${baseUrl}${path}`, { method: 'POST', headers, body });
  return { status: response.status, json: await response.json() };
}

async function userRow(userId: number): Promise<Record<string, unknown> | undefined> {
  const { rows } = await db.query('SELECT user_name, user_email, api_token_hash, quota_limit FROM users WHERE user_id = $1', [userId]);
  return rows[0];
}

async function inboxRow(webhookId: string): Promise<Record<string, unknown> | undefined> {
  const { rows } = await db.query('SELECT topic, event, processed_at FROM webhook_inbox WHERE webhook_id = $1', [webhookId]);
  return rows[0];
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
let nextUserId = 40000;
const newUser = (overrides: Record<string, unknown> = {}) => {
  nextUserId += 1;
  return { user_id: nextUserId, name: `User ${nextUserId}`, email: `user${nextUserId}@example.com`, ...overrides };
};

describe('receiver: accepted webhooks', () => {
  it('when WebhookRequest sends user.created, then 200 Accepted, the user exists with only the token hash, and the inbox records it', async () => {
    const user = newUser({ token: 'token-for-the-created-user-0001' });
    const hook = new WebhookRequest(`${baseUrl}/webhooks/users`).setPayload(user).setEvent('user.created').sign(SECRET);

    const response = await hook.send();

    expect(response.status).toBe(200);
    expect(response.data).toEqual(ACCEPTED);
    expect(await userRow(user.user_id)).toEqual({
      user_name: user.name,
      user_email: user.email,
      api_token_hash: sha256('token-for-the-created-user-0001'),
      quota_limit: 0,
    });
    const inbox = await inboxRow(hook.getWebhookId() as string);
    expect(inbox).toMatchObject({ topic: 'users', event: 'user.created' });
    expect(inbox?.processed_at).toBeInstanceOf(Date);
  });

  it('when the standardwebhooks package signs, then the receiver verifies it', async () => {
    const user = newUser();
    const body = serializeEnvelope(user, { event: 'user.created', signable: true });
    const id = newWebhookId();
    const now = new Date();
    const headers = {
      'Content-Type': 'application/json',
      'webhook-id': id,
      'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
      'webhook-signature': new Webhook(SECRET).sign(id, now, body),
    };

    expect(await post('/webhooks/users', { body, headers })).toEqual({ status: 200, json: ACCEPTED });
    expect(await userRow(user.user_id)).toMatchObject({ user_name: user.name });
  });

  it('when the body holds slashes and non-ASCII, then the bytes verify and are stored unchanged', async () => {
    const user = newUser({ name: 'Zoë / 日本 😀 \\ "q"', email: `zoë${nextUserId}@exämple.com` });
    expect(await post('/webhooks/users', signed('user.created', user))).toEqual({ status: 200, json: ACCEPTED });
    expect(await userRow(user.user_id)).toMatchObject({ user_name: 'Zoë / 日本 😀 \\ "q"', user_email: user.email });
  });

  it('when the sender formats its JSON differently, then the raw bytes verify (nothing is re-serialised)', async () => {
    const user = newUser();
    const body = JSON.stringify({ _data: user, _config: { 'app.webhook.event': 'user.created', 'app.webhook.signable': 1 } }, null, 2);
    const headers = signedHeaders({ id: newWebhookId(), timestamp: Math.floor(Date.now() / 1000), body, secret: SECRET });
    expect(await post('/webhooks/users', { body, headers })).toEqual({ status: 200, json: ACCEPTED });
  });

  it('when the same webhook-id arrives twice, then both get 200 and the handler runs once', async () => {
    const user = newUser();
    const delivery = signed('user.created', user);
    expect(await post('/webhooks/users', delivery)).toEqual({ status: 200, json: ACCEPTED });
    await db.query('UPDATE users SET user_name = $1 WHERE user_id = $2', ['changed after the first delivery', user.user_id]);

    expect(await post('/webhooks/users', delivery)).toEqual({ status: 200, json: ACCEPTED });

    expect(await userRow(user.user_id)).toMatchObject({ user_name: 'changed after the first delivery' });
    const { rows } = await db.query('SELECT count(*)::int AS n FROM webhook_inbox WHERE webhook_id = $1', [delivery.headers['webhook-id']]);
    expect(rows[0].n).toBe(1);
  });

  it('when user.updated arrives, then name and email change, a missing token keeps the hash and token null revokes it', async () => {
    const user = newUser({ token: 'token-kept-across-updates-0001', quota_limit: 5 });
    await post('/webhooks/users', signed('user.created', user));

    await post('/webhooks/users', signed('user.updated', { user_id: user.user_id, name: 'Renamed', email: `renamed${user.user_id}@example.com` }));
    expect(await userRow(user.user_id)).toEqual({
      user_name: 'Renamed',
      user_email: `renamed${user.user_id}@example.com`,
      api_token_hash: sha256('token-kept-across-updates-0001'),
      quota_limit: 5,
    });

    await post('/webhooks/users', signed('user.updated', { user_id: user.user_id, name: 'Renamed', email: `renamed${user.user_id}@example.com`, token: null }));
    expect(await userRow(user.user_id)).toMatchObject({ api_token_hash: null });
  });

  it('when user.registered carries the Luminova shape {status, user:{id, email}} (the design vector), then the user is created, named by the email', async () => {
    const id = 42;

    const answer = await post('/webhooks/users', signed('user.registered', { status: 'OK', user: { id, email: 'user@example.com' } }));

    expect(answer).toEqual({ status: 200, json: ACCEPTED });
    expect(await userRow(id)).toEqual({ user_name: 'user@example.com', user_email: 'user@example.com', api_token_hash: null, quota_limit: 0 });
  });

  it('when user.updated gives only some fields, under their column names, then only those change', async () => {
    const user = newUser({ quota_limit: 7 });
    await post('/webhooks/users', signed('user.created', user));

    const answer = await post('/webhooks/users', signed('user.updated', { id: user.user_id, user_name: 'Only Renamed', token: 'a-token-given-by-update-0001' }));

    expect(answer).toEqual({ status: 200, json: ACCEPTED });
    expect(await userRow(user.user_id)).toEqual({
      user_name: 'Only Renamed',
      user_email: user.email,
      api_token_hash: sha256('a-token-given-by-update-0001'),
      quota_limit: 7,
    });
  });

  it('when user.deleted arrives, then the user is gone; an unknown user.* event is acknowledged and changes nothing', async () => {
    const user = newUser();
    await post('/webhooks/users', signed('user.created', user));
    expect(await post('/webhooks/users', signed('user.suspended', { user_id: user.user_id }))).toEqual({ status: 200, json: ACCEPTED });
    expect(await userRow(user.user_id)).toBeDefined();

    expect(await post('/webhooks/users', signed('user.deleted', { user_id: user.user_id }))).toEqual({ status: 200, json: ACCEPTED });
    expect(await userRow(user.user_id)).toBeUndefined();
  });

  it("when user.deleted removes a user with posts, then each post becomes a post.deleted event in the outbox for the api's relay", async () => {
    const user = newUser();
    await post('/webhooks/users', signed('user.created', user));
    const { rows: posts } = await db.query(
      `INSERT INTO posts (post_uuid, user_id, post_title, post_body)
       VALUES (gen_random_uuid(), $1, 'one', 'b'), (gen_random_uuid(), $1, 'two', 'b') RETURNING pid, post_uuid`,
      [user.user_id],
    );
    const { rows: [endpoint] } = await db.query(
      `INSERT INTO webhook_endpoints (url, secret, events) VALUES ('http://127.0.0.1:9/deleted', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', '{post.deleted}') RETURNING id`,
    );
    try {
      expect(await post('/webhooks/users', signed('user.deleted', { user_id: user.user_id }))).toEqual({ status: 200, json: ACCEPTED });

      const { rows: deliveries } = await db.query(
        `SELECT d.event, e.body, d.status, d.enqueued_at FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id
          WHERE d.endpoint_id = $1 ORDER BY e.body`,
        [endpoint.id],
      );
      const expected = posts
        .map((p) => serializeEnvelope({ pid: p.pid, uuid: p.post_uuid, user_id: user.user_id }, { event: 'post.deleted', signable: true }))
        .sort();
      expect(deliveries).toEqual(expected.map((body) => ({ event: 'post.deleted', body, status: 'pending', enqueued_at: null })));
      expect((await db.query('SELECT count(*)::int AS n FROM posts WHERE user_id = $1', [user.user_id])).rows[0].n).toBe(0);
    } finally {
      await db.query('UPDATE webhook_endpoints SET active = false WHERE id = $1', [endpoint.id]);
    }
  });

  it('when a post event arrives at the posts sink, then 200 and the inbox records it under posts', async () => {
    const delivery = signed('post.created', { pid: 100001, uuid: '1b4e28ba-2fa1-11d2-883f-0016d3cca427', user_id: 1, title: 'a/b' });
    expect(await post('/webhooks/posts', delivery)).toEqual({ status: 200, json: ACCEPTED });
    expect(await inboxRow(delivery.headers['webhook-id'])).toMatchObject({ topic: 'posts', event: 'post.created' });
  });
});

describe('receiver: refused webhooks answer the clean 500 and change nothing', () => {
  const drop = (headers: Record<string, string>, ...names: string[]) =>
    Object.fromEntries(Object.entries(headers).filter(([name]) => !names.includes(name)));

  const cases: Array<[string, string, () => Signed]> = [
    ['no signature header at all', '/webhooks/users', () => {
      const s = signed('user.created', newUser());
      return { body: s.body, headers: drop(s.headers, 'X-Signature', 'webhook-id', 'webhook-timestamp', 'webhook-signature') };
    }],
    ['only X-Signature, computed with another secret', '/webhooks/users', () => {
      const s = signed('user.created', newUser(), { secret: 'whsec_b3RoZXItc2VjcmV0' });
      return { body: s.body, headers: drop(s.headers, 'webhook-id', 'webhook-timestamp', 'webhook-signature') };
    }],
    ['only a valid X-Signature (an independent node:crypto HMAC; the webhook-* headers stripped)', '/webhooks/users', () => {
      const body = serializeEnvelope(newUser(), { event: 'user.registered', signable: true });
      const signature = createHmac('sha256', Buffer.from(SECRET, 'utf8')).update(Buffer.from(body, 'utf8')).digest('hex');
      return { body, headers: { 'Content-Type': 'application/json', 'X-Signature': signature } };
    }],
    ['a tampered body', '/webhooks/users', () => {
      const s = signed('user.created', newUser());
      return { body: s.body.replace('"User ', '"Mallory '), headers: s.headers };
    }],
    ['the webhook-signature header missing', '/webhooks/users', () => {
      const s = signed('user.created', newUser());
      return { body: s.body, headers: drop(s.headers, 'webhook-signature') };
    }],
    ['a timestamp 301 s old', '/webhooks/users', () => signed('user.created', newUser(), { timestamp: Math.floor(Date.now() / 1000) - 301 })],
    // Not 301: an "ahead" timestamp shrinks while the request travels, and seconds tick over.
    ['a timestamp 305 s ahead', '/webhooks/users', () => signed('user.created', newUser(), { timestamp: Math.floor(Date.now() / 1000) + 305 })],
    ['an envelope without the signable flag', '/webhooks/users', () => {
      const body = serializeEnvelope(newUser(), { event: 'user.created' });
      return { body, headers: signedHeaders({ id: newWebhookId(), timestamp: Math.floor(Date.now() / 1000), body, secret: SECRET }) };
    }],
    ['a post event sent to the users route', '/webhooks/users', () => signed('post.created', newUser())],
    ['a user event sent to the posts route', '/webhooks/posts', () => signed('user.created', newUser())],
    ['an envelope without an event', '/webhooks/users', () => {
      const body = serializeEnvelope(newUser(), { signable: true });
      return { body, headers: signedHeaders({ id: newWebhookId(), timestamp: Math.floor(Date.now() / 1000), body, secret: SECRET }) };
    }],
    ['a user_id out of range', '/webhooks/users', () => signed('user.created', newUser({ user_id: 100000 }))],
    ['a new user without an email', '/webhooks/users', () => signed('user.created', { user_id: 49999, name: 'No Email' })],
    ['a signed body that is not JSON', '/webhooks/users', () => {
      const body = '{"_data":';
      return { body, headers: signedHeaders({ id: newWebhookId(), timestamp: Math.floor(Date.now() / 1000), body, secret: SECRET }) };
    }],
    ['a signed body with __proto__ (poisoning)', '/webhooks/users', () => {
      const user = newUser();
      const body = `{"_data":{"user_id":${user.user_id},"name":"n","email":"${user.email}","__proto__":{"admin":true}},"_config":{"app.webhook.event":"user.created","app.webhook.signable":1}}`;
      return { body, headers: signedHeaders({ id: newWebhookId(), timestamp: Math.floor(Date.now() / 1000), body, secret: SECRET }) };
    }],
    ['a signed body in another content type', '/webhooks/users', () => {
      const s = signed('user.created', newUser());
      return { body: s.body, headers: { ...s.headers, 'Content-Type': 'text/plain' } };
    }],
    ['a body over 1 MB', '/webhooks/users', () => signed('user.created', newUser({ padding: 'x'.repeat(1024 * 1024) }))],
  ];

  it.each(cases)('when %s, then 500 {"status":"ERROR","message":"Server error"}', async (_name, path, make) => {
    const delivery = make();
    const before = await db.query('SELECT (SELECT count(*) FROM users)::int AS users, (SELECT count(*) FROM webhook_inbox)::int AS inbox');

    expect(await post(path, delivery)).toEqual({ status: 500, json: SERVER_ERROR });

    const after = await db.query('SELECT (SELECT count(*) FROM users)::int AS users, (SELECT count(*) FROM webhook_inbox)::int AS inbox');
    expect(after.rows[0]).toEqual(before.rows[0]);
  });

  it('when the handler fails mid-transaction, then the webhook-id is not marked and a redelivery is processed', async () => {
    const holder = newUser();
    await post('/webhooks/users', signed('user.created', holder));
    const user = newUser({ email: holder.email });
    const delivery = signed('user.created', user);

    expect(await post('/webhooks/users', delivery)).toEqual({ status: 500, json: SERVER_ERROR });
    expect(await inboxRow(delivery.headers['webhook-id'])).toBeUndefined();

    await post('/webhooks/users', signed('user.deleted', { user_id: holder.user_id }));
    expect(await post('/webhooks/users', delivery)).toEqual({ status: 200, json: ACCEPTED });
    expect(await userRow(user.user_id)).toMatchObject({ user_email: holder.email });
  });
});

describe('receiver: health', () => {
  it('when the database is up, then /health and /ready answer 200', async () => {
    const health = await fetch(`${baseUrl}/health`);
    expect([health.status, await health.json()]).toEqual([200, { status: 'ok' }]);
    const ready = await fetch(`${baseUrl}/ready`);
    expect([ready.status, await ready.json()]).toEqual([200, { status: 'ready', checks: { database: 'up' } }]);
  });
});
