import { createHash } from 'node:crypto';
import { Client } from 'pg';
import { createTestEnvironment, processEnv, TestEnvironment } from '../support/environment';
import { freePort, runScript, ServiceProcess, startService } from '../support/processes';
import { waitFor } from '../support/wait-for';

/**
 * The whole system as separate processes, started with the same commands compose runs:
 * api layout a and b, the receiver, and the webhook-worker, over one database and Redis.
 */
describe('the whole system, end to end', () => {
  const secret = 'whsec_' + Buffer.from('end-to-end-receiver-secret-0123456789').toString('base64');
  let env: TestEnvironment;
  let db: Client;
  let shared: Record<string, string>;
  let ports: { apiA: number; apiB: number; receiver: number; worker: number };
  const services = new Map<string, ServiceProcess>();

  const start = async (name: 'api-a' | 'api-b' | 'receiver' | 'webhook-worker') => {
    const definitions = {
      'api-a': ['dist/services/api/src/server.js', { API_LAYOUT: 'a', PORT: String(ports.apiA) }, ports.apiA],
      'api-b': ['dist/services/api/src/server.js', { API_LAYOUT: 'b', PORT: String(ports.apiB) }, ports.apiB],
      receiver: ['dist/services/receiver/src/server.js', { PORT: String(ports.receiver) }, ports.receiver],
      'webhook-worker': ['dist/services/webhook-worker/src/main.js', { WORKER_METRICS_PORT: String(ports.worker) }, ports.worker],
    } as const;
    const [script, extra, port] = definitions[name];
    services.set(name, await startService(name, script, { ...shared, ...extra }, port));
  };

  const count = async (sql: string, params: unknown[] = []) => Number((await db.query(sql, params)).rows[0].count);

  beforeAll(async () => {
    env = await createTestEnvironment();
    db = new Client({ connectionString: env.databaseUrl });
    await db.connect();
    ports = { apiA: await freePort(), apiB: await freePort(), receiver: await freePort(), worker: await freePort() };
    shared = processEnv(env, {
      LOG_LEVEL: 'warn',
      HOST: '127.0.0.1',
      RECEIVER_SECRET: secret,
      WEBHOOK_RETRY_SCHEDULE: '0.2,0.5,1',
      OUTBOX_RELAY_INTERVAL_MS: '200',
      WORKER_SHUTDOWN_TIMEOUT_MS: '5000',
      WORKER_LOCK_DURATION_MS: '2000',
    });
    await db.query(
      `INSERT INTO users (user_id, user_name, user_email, api_token_hash)
       VALUES (1, 'writer', 'writer@example.com', $1)`,
      [createHash('sha256').update('e2e-writer-token').digest('hex')],
    );
    await db.query(`INSERT INTO webhook_endpoints (url, secret, events) VALUES ($1, $2, '{post.created}')`, [
      `http://127.0.0.1:${ports.receiver}/webhooks/posts`,
      secret,
    ]);
    await Promise.all((['receiver', 'api-a', 'api-b', 'webhook-worker'] as const).map(start));
  }, 60_000);

  afterAll(async () => {
    await Promise.all([...services.values()].map((service) => service.stop('SIGKILL')));
    await db?.end();
    await env?.cleanup();
  });

  const createPostOnB = async (title: string) => {
    const response = await fetch(`http://127.0.0.1:${ports.apiB}/api/v1/posts`, {
      method: 'POST',
      headers: { authorization: 'Bearer e2e-writer-token', user_id: '1', 'content-type': 'application/json' },
      body: JSON.stringify({ title, content: 'written end to end' }),
    });
    expect(response.status).toBe(200);
    const body = (await response.json()) as { status: number; pid: string };
    expect(body.status).toBe(2001);
    return body.pid;
  };

  it('when a post is created on layout b, then a signed post.created lands in the receiver inbox under its delivery id', async () => {
    const pid = await createPostOnB('arrives signed');

    const delivery = await waitFor(
      async () =>
        (
          await db.query(
            `SELECT d.id, d.status FROM webhook_deliveries d
             JOIN webhook_events e ON e.id = d.event_id
             JOIN webhook_inbox i ON i.webhook_id = d.id AND i.processed_at IS NOT NULL
             WHERE d.event = 'post.created' AND e.body LIKE $1`,
            [`%"pid":${pid}%`],
          )
        ).rows[0],
      15_000,
      'the post.created delivery to reach the receiver inbox',
    );
    expect(delivery.id).toMatch(/^msg_/);
    await waitFor(
      async () => (await db.query('SELECT status FROM webhook_deliveries WHERE id = $1', [delivery.id])).rows[0].status === 'succeeded',
      5_000,
      'the delivery to be marked succeeded',
    );
  });

  it('when `webhook send` delivers user.created to the receiver, then that user can authenticate on layout a', async () => {
    const token = 'token-provisioned-by-a-webhook-0001';
    const result = await runScript(
      'dist/scripts/webhook-cli.js',
      [
        'send',
        '--url',
        `http://127.0.0.1:${ports.receiver}/webhooks/users`,
        '--event',
        'user.created',
        '--data',
        JSON.stringify({ user_id: 4242, name: 'Webhook User', email: 'hooked@example.com', token }),
        '--secret',
        secret,
      ],
      shared,
    );
    expect(result).toMatchObject({ code: 0 });
    expect(JSON.parse(result.stdout)).toMatchObject({ status: 200, response: { status: 'OK', message: 'Accepted' } });

    const response = await fetch(`http://127.0.0.1:${ports.apiA}/api/v1/posts`, {
      headers: { authorization: `Bearer ${token}`, user_id: '4242' },
    });
    expect([200, 204]).toContain(response.status);
    const refused = await fetch(`http://127.0.0.1:${ports.apiA}/api/v1/posts`, {
      headers: { authorization: 'Bearer not-the-token-of-user-4242', user_id: '4242' },
    });
    expect(refused.status).toBe(401);
  });

  it('when the worker and api are stopped with SIGTERM during a burst, then every post event still arrives after a restart', async () => {
    const before = await count(`SELECT count(*) FROM webhook_deliveries WHERE event = 'post.created'`);
    const burst = 40;
    const created = await Promise.all(Array.from({ length: burst }, (_, i) => createPostOnB(`burst ${i}`)));
    expect(new Set(created).size).toBe(burst);

    const exits = await Promise.all([services.get('webhook-worker')!.stop('SIGTERM'), services.get('api-b')!.stop('SIGTERM')]);
    expect(exits).toEqual([0, 0]);
    expect(await count(`SELECT count(*) FROM webhook_deliveries WHERE event = 'post.created'`)).toBe(before + burst);

    await start('webhook-worker');
    await waitFor(
      async () => (await count(`SELECT count(*) FROM webhook_deliveries WHERE status <> 'succeeded'`)) === 0,
      30_000,
      'every delivery to succeed after the restart',
    );
    const received = await count(
      `SELECT count(*) FROM webhook_inbox i JOIN webhook_deliveries d ON d.id = i.webhook_id
       WHERE i.topic = 'posts' AND i.processed_at IS NOT NULL`,
    );
    expect(received).toBe(before + burst);
  }, 60_000);
});
