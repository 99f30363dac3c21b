import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { buildApp as buildReceiver } from '../../services/receiver/src/app';
import { hashApiToken } from '../../services/api/src/users/api-token';
import { createDatabase, Database } from '../../shared/db';
import { WebhookRequest } from '../../shared/webhook';
import { createTestEnvironment, processEnv, TestEnvironment } from '../support/environment';
import { createUser, TestUser } from '../support/factories';
import { freePort, ServiceProcess, startService } from '../support/processes';
import { createServiceKey } from '../api/support/operations';

const SECRET = 'whsec_cmVjZWl2ZXItcmV2b2NhdGlvbi10ZXN0LXNlY3JldA==';

/**
 * docs/design.md §4 "Revocation" through the receiver: two api processes (from dist/) cache verified
 * users; a user.deleted or a token replaced by a user webhook stops the old token in both
 * within 1 s of the receiver's answer, and a replaced or removed token the user's portal
 * sessions too (docs/design.md §11.6).
 */
describe('receiver: user webhooks revoke credentials in every api process', () => {
  let env: TestEnvironment;
  let db: Database;
  let receiver: FastifyInstance;
  let receiverUrl: string;
  const apis: { process: ServiceProcess; port: number }[] = [];

  beforeAll(async () => {
    env = await createTestEnvironment({ RECEIVER_SECRET: SECRET }, 'receiver');
    db = createDatabase(env.databaseUrl, { poolMax: 2 });
    receiver = await buildReceiver(env.config);
    await receiver.listen({ host: '127.0.0.1', port: 0 });
    receiverUrl = `http://127.0.0.1:${(receiver.server.address() as AddressInfo).port}`;
    for (const layout of ['a', 'b']) {
      const port = await freePort();
      const variables = processEnv(env);
      const process = await startService(
        `api-${layout}`,
        'dist/services/api/src/server.js',
        { ...variables, API_LAYOUT: layout, PORT: String(port), HOST: '127.0.0.1', RATE_LIMIT_PER_MIN: '0' },
        port,
      );
      apis.push({ process, port });
    }
  }, 60_000);

  afterAll(async () => {
    await Promise.all(apis.map(({ process }) => process.stop()));
    await receiver?.close();
    await db?.close();
    await env?.cleanup();
  });

  const postsUrl = (user: TestUser) => `/api/v1/posts?user=${user.user.userId}`;

  async function status(port: number, user: TestUser, headers = user.headers): Promise<number> {
    const res = await fetch(`http://127.0.0.1:${port}${postsUrl(user)}`, { headers });
    await res.arrayBuffer();
    return res.status;
  }

  async function warm(user: TestUser): Promise<void> {
    for (const { port } of apis) for (let i = 0; i < 3; i++) expect(await status(port, user)).not.toBe(401);
  }

  /** The slowest api's time, ms after `since`, until it refuses the user's token (Infinity after 5 s). */
  async function msUntilRefusedEverywhere(user: TestUser, since: number): Promise<number> {
    const times = await Promise.all(
      apis.map(async ({ port }) => {
        while (Date.now() - since < 5_000) {
          if ((await status(port, user)) === 401) return Date.now() - since;
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        return Infinity;
      }),
    );
    return Math.max(...times);
  }

  const sendUserEvent = (event: string, data: object) =>
    new WebhookRequest(`${receiverUrl}/webhooks/users`).setPayload(data).setEvent(event).sign(SECRET).send();

  it('when user.deleted is accepted, then both api processes refuse the user within 1 s', async () => {
    const user = await createUser(db);
    await warm(user);

    await sendUserEvent('user.deleted', { user_id: user.user.userId });

    expect(await msUntilRefusedEverywhere(user, Date.now())).toBeLessThan(1_000);
  });

  it('when user.updated replaces the token, then both api processes refuse the old one within 1 s and take the new one', async () => {
    const user = await createUser(db);
    await warm(user);
    const token = 'a-token-replaced-by-a-user-webhook-0001';

    await sendUserEvent('user.updated', { user_id: user.user.userId, token });

    expect(await msUntilRefusedEverywhere(user, Date.now())).toBeLessThan(1_000);
    const [{ api_token_hash: stored }] = (await db.sequelize.query('SELECT api_token_hash FROM users WHERE user_id = $1', { bind: [user.user.userId] }))[0] as { api_token_hash: string }[];
    expect(stored).toBe(hashApiToken(token));
    for (const { port } of apis) expect(await status(port, user, { ...user.headers, authorization: `Bearer ${token}` })).not.toBe(401);
  });

  /** A portal session of `user`, opened through the first api: its headers. */
  async function openPortalSession(user: TestUser): Promise<Record<string, string>> {
    const operator = await createServiceKey(db, ['portal:write']);
    const post = async (path: string, headers: Record<string, string>, body: object) => {
      const res = await fetch(`http://127.0.0.1:${apis[0].port}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
      expect(res.status).toBe(201);
      return (await res.json()) as { url: string; token: string };
    };
    const link = await post('/api/v1/portal-links', operator.headers, { user_id: user.user.userId });
    const session = await post('/api/v1/portal-sessions', {}, { token: new URL(link.url).hash.replace('#token=', '') });
    return { authorization: `Bearer ${session.token}` };
  }

  const sessionStatus = async (port: number, headers: Record<string, string>) => {
    const res = await fetch(`http://127.0.0.1:${port}/api/v1/endpoints`, { headers });
    await res.arrayBuffer();
    return res.status;
  };

  it.each([
    ['replaces', 'a-token-replaced-by-a-user-webhook-0002'],
    ['removes', null],
  ])('when user.updated %s the token, then both api processes refuse the user’s portal session within 1 s', async (_what, token) => {
    const user = await createUser(db);
    const headers = await openPortalSession(user);
    for (const { port } of apis) for (let i = 0; i < 3; i++) expect(await sessionStatus(port, headers)).toBe(200);

    await sendUserEvent('user.updated', { user_id: user.user.userId, token });

    const since = Date.now();
    const times = await Promise.all(
      apis.map(async ({ port }) => {
        while (Date.now() - since < 5_000) {
          if ((await sessionStatus(port, headers)) === 401) return Date.now() - since;
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        return Infinity;
      }),
    );
    expect(Math.max(...times)).toBeLessThan(1_000);
  });
});
