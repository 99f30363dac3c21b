import { createHash, randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { createTestEnvironment, processEnv, TestEnvironment } from '../support/environment';
import { freePort, startService, ServiceProcess } from '../support/processes';
import { startTcpProxy } from '../support/tcp-proxy';
import { waitFor } from '../support/wait-for';

/**
 * docs/design.md §15: an api killed mid-request with an Idempotency-Key does not block the key for
 * 24 h. A lock the test holds on `posts` stops the create after its key is claimed; the api
 * is killed there. A retry after the lease (IDEMPOTENCY_LEASE_MS, 2 s here) either answers
 * with the post the dead request committed, or runs again, and one post exists either way.
 * docs/design.md §12.1: the same for `POST /webhooks` and `POST /events`, killed once their
 * deliveries committed (a proxy in front of PostgreSQL withholds the commit's answer): the
 * retry replays the ids made, never a second delivery.
 */
describe('Idempotency-Key of a request whose api died', () => {
  const LEASE_MS = 2_000;
  let env: TestEnvironment;
  let db: Client;
  let token: string;
  let userId: number;
  let keyNumber = 0;

  beforeAll(async () => {
    env = await createTestEnvironment();
    db = new Client({ connectionString: env.databaseUrl });
    await db.connect();
    token = `crash-test-token-${Date.now()}`;
    const { rows } = await db.query<{ user_id: number }>(
      `INSERT INTO users (user_name, user_email, api_token_hash) VALUES ('crash', 'crash@example.com', encode(sha256($1::bytea), 'hex')) RETURNING user_id`,
      [token],
    );
    userId = rows[0].user_id;
  });

  afterAll(async () => {
    await db?.end();
    await env?.cleanup();
  });

  const startApi = async (layout: 'a' | 'b', databaseUrl = env.databaseUrl): Promise<{ api: ServiceProcess; port: number }> => {
    const port = await freePort();
    const vars = processEnv(
      { ...env, databaseUrl },
      { API_LAYOUT: layout, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn', IDEMPOTENCY_LEASE_MS: String(LEASE_MS) },
    );
    return { api: await startService(`api-${layout}`, 'dist/services/api/src/server.js', vars, port), port };
  };

  const create = (layout: 'a' | 'b', port: number, key: string, title: string) =>
    fetch(`http://127.0.0.1:${port}/api/v1/posts${layout === 'a' ? '/create' : ''}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, user_id: String(userId), 'content-type': 'application/json', 'idempotency-key': key },
      body: JSON.stringify(layout === 'a' ? { title, body: 'once', userId } : { title, content: 'once' }),
    });

  const postsTitled = async (title: string) => (await db.query<{ pid: number }>('SELECT pid FROM posts WHERE post_title = $1', [title])).rows;
  /** Until the key is answered or its lease, no longer renewed by the dead api, has lapsed. */
  const leaseLapsed = (key: string) =>
    waitFor(
      async () => (await db.query('SELECT 1 FROM idempotency_keys WHERE idempotency_key = $1 AND (response_status IS NOT NULL OR lease_expires_at <= now())', [key])).rowCount === 1,
      LEASE_MS + 5_000,
      'the lease to lapse',
    );

  /**
   * Sends a create with `key` to a fresh api, holds it at its insert with a table lock, kills
   * the api there, then lets PostgreSQL either finish the dead request's statement
   * (`committed`) or end its backend first, as it does once it notices the closed connection.
   */
  async function killMidCreate(layout: 'a' | 'b', key: string, title: string, outcome: 'committed' | 'not committed'): Promise<void> {
    const { api, port } = await startApi(layout);
    const lock = new Client({ connectionString: env.databaseUrl });
    await lock.connect();
    try {
      await lock.query('BEGIN');
      await lock.query('LOCK TABLE posts IN SHARE ROW EXCLUSIVE MODE');
      const request = create(layout, port, key, title).catch(() => 'no answer');
      const waiting = await waitFor(
        async () =>
          (
            await db.query<{ pid: number }>(
              `SELECT a.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE NOT l.granted AND l.relation = 'posts'::regclass`,
            )
          ).rows[0],
        10_000,
        'the create to wait at its insert',
      );
      await api.stop('SIGKILL');
      expect(await request).toBe('no answer');
      if (outcome === 'not committed') await db.query('SELECT pg_terminate_backend($1)', [waiting.pid]);
      await lock.query('ROLLBACK');
    } finally {
      await lock.end();
    }
    await waitFor(async () => (await postsTitled(title)).length === (outcome === 'committed' ? 1 : 0), 5_000, `the dead request's post to be ${outcome}`);
  }

  it.each([
    ['a', 'committed'],
    ['b', 'committed'],
    ['a', 'not committed'],
    ['b', 'not committed'],
  ] as const)('when Layout %s is killed mid-create and the post was %s, then a retry after the lease makes exactly one post and answers it', async (layout, outcome) => {
    const key = `crash-${layout}-${++keyNumber}-${Date.now()}`;
    const title = `Survives a crash ${key}`;
    await killMidCreate(layout, key, title, outcome);
    const committedPid = (await postsTitled(title))[0]?.pid;

    const { api, port } = await startApi(layout);
    try {
      await leaseLapsed(key);
      const retry = await create(layout, port, key, title);
      expect(retry.status).toBe(200);
      const body = (await retry.json()) as { status: number; pid?: string; item?: { postId: number } };
      const [post] = await postsTitled(title);
      expect(await postsTitled(title)).toHaveLength(1);
      if (layout === 'a') expect(body).toMatchObject({ status: 200, item: { postId: post.pid } });
      else expect(body).toMatchObject({ status: 2001, pid: String(post.pid) });
      if (outcome === 'committed') expect(post.pid).toBe(committedPid);

      // The answer is now recorded: a second retry replays it.
      const again = await create(layout, port, key, title);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(await again.json()).toEqual(body);
      expect(await postsTitled(title)).toHaveLength(1);
    } finally {
      await api.stop('SIGKILL');
    }
  });

  it.each([
    ['/webhooks', (marker: string) => ({ url: 'http://127.0.0.1:9/hook', event: 'demo.ping', payload: { marker }, secret: 'whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQ=' })],
    ['/events', (marker: string) => ({ event: 'post.updated', payload: { marker } })],
  ] as const)(
    'when the api is killed after POST %s committed and before it answered, then a retry after the lease replays the ids made and no second delivery',
    async (route, bodyOf) => {
      const key = `crash-${route.slice(1)}-${++keyNumber}-${Date.now()}`;
      const marker = `body-${key}`;
      const serviceKey = `sk_${randomBytes(24).toString('base64url')}`;
      await db.query("INSERT INTO service_keys (name, key_hash, scopes) VALUES ('crash', $1, '{*}')", [createHash('sha256').update(serviceKey).digest('hex')]);
      const headers = { authorization: `Bearer ${serviceKey}`, 'content-type': 'application/json', 'idempotency-key': key };
      const send = (port: number) => fetch(`http://127.0.0.1:${port}/api/v1${route}`, { method: 'POST', headers, body: JSON.stringify(bodyOf(marker)) });
      const deliveries = async () =>
        (
          await db.query<{ id: string }>(
            'SELECT d.id FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id WHERE e.body LIKE $1 ORDER BY d.endpoint_id NULLS FIRST',
            [`%${marker}%`],
          )
        ).rows.map((row) => row.id);

      const real = new URL(env.databaseUrl);
      const proxy = await startTcpProxy({ host: real.hostname, port: Number(real.port || 5432) });
      try {
        const viaProxy = new URL(real);
        viaProxy.hostname = '127.0.0.1';
        viaProxy.port = String(proxy.port);
        const { api, port } = await startApi('a', viaProxy.toString());
        for (const n of [1, 2]) {
          const endpoint = await fetch(`http://127.0.0.1:${port}/api/v1/endpoints`, {
            method: 'POST',
            headers: { authorization: headers.authorization, 'content-type': 'application/json' },
            body: JSON.stringify({ url: `http://127.0.0.1:9/crash/${key}/${n}`, events: ['post.updated'], filter: { marker } }),
          });
          expect(endpoint.status).toBe(201);
        }
        proxy.loseCommitAnswer(marker, 'hang');
        const request = send(port).catch(() => 'no answer');
        await waitFor(async () => (await deliveries()).length > 0, 10_000, 'the deliveries to commit');
        await api.stop('SIGKILL');
        expect(await request).toBe('no answer');
      } finally {
        await proxy.close();
      }
      const committed = await deliveries();
      expect(committed).toHaveLength(route === '/webhooks' ? 1 : 2);

      const { api, port } = await startApi('b');
      try {
        await leaseLapsed(key);
        const retry = await send(port);
        expect([retry.status, retry.headers.get('idempotent-replayed')]).toEqual([202, 'true']);
        expect(await retry.json()).toEqual(route === '/webhooks' ? { id: committed[0] } : { ids: committed });
        expect(await deliveries()).toEqual(committed);
      } finally {
        await api.stop('SIGKILL');
      }
    },
  );
});
