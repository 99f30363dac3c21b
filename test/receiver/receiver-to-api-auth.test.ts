import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { buildApp as buildApi } from '../../services/api/src/app';
import { buildApp as buildReceiver } from '../../services/receiver/src/app';
import { WebhookRequest } from '../../shared/webhook';
import { type TestEnvironment, createTestEnvironment } from '../support/environment';
import { waitFor } from '../support/wait-for';

const SECRET = 'whsec_cmVjZWl2ZXItdG8tYXBpLXRlc3Qtc2VjcmV0';
const TOKEN = 'token-issued-through-a-user-webhook-0001';
const USER_ID = 4242;

let env: TestEnvironment;
let uploadDir: string;
let receiver: FastifyInstance;
let api: FastifyInstance;
let receiverUrl: string;
let apiUrl: string;

async function listen(app: FastifyInstance): Promise<string> {
  await app.listen({ host: '127.0.0.1', port: 0 });
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

beforeAll(async () => {
  env = await createTestEnvironment({ RECEIVER_SECRET: SECRET }, 'receiver');
  uploadDir = mkdtempSync(path.join(tmpdir(), 'receiver-api-'));
  receiver = await buildReceiver(env.config);
  receiverUrl = await listen(receiver);
  api = buildApi({ ...env.config, service: 'api', apiLayout: 'a', uploadDir });
  apiUrl = await listen(api);
});

afterAll(async () => {
  await api?.close();
  await receiver?.close();
  await env?.cleanup();
  if (uploadDir) rmSync(uploadDir, { recursive: true, force: true });
});

function sendUserEvent(event: string, data: Record<string, unknown>) {
  return new WebhookRequest(`${receiverUrl}/webhooks/users`).setPayload(data).setEvent(event).sign(SECRET).send();
}

function createPost(token: string) {
  return fetch(`${apiUrl}/api/v1/posts/create`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}`, user_id: String(USER_ID) },
    body: JSON.stringify({ title: 'Hello', body: 'Made by a webhook user', userId: USER_ID }),
  });
}

describe('a user created by webhook, on the api', () => {
  it('when user.created carries a token, then that token authenticates on the api; when user.updated revokes it, then 401', async () => {
    const before = await createPost(TOKEN);
    expect(before.status).toBe(401);

    await sendUserEvent('user.created', { user_id: USER_ID, name: 'Webhook User', email: 'webhook.user@example.com', token: TOKEN });

    const created = await createPost(TOKEN);
    expect(created.status).toBe(200);
    expect(await created.json()).toMatchObject({ status: 200, message: 'Post was successfully created.', item: { userId: USER_ID } });
    expect((await createPost('some-other-token-0000000000000000')).status).toBe(401);

    await sendUserEvent('user.updated', { user_id: USER_ID, name: 'Webhook User', email: 'webhook.user@example.com', token: null });

    // The api learns of the revocation over Redis pub/sub, so the promise is a refusal within 1 s, not on the next request.
    const revoked = await waitFor(
      async () => {
        const answer = await createPost(TOKEN);
        return answer.status === 401 ? answer : undefined;
      },
      1_000,
      'the revoked token to be refused',
    );
    expect(await revoked.json()).toEqual({ status: 401, message: 'Invalid authentication token or client ID.' });
  });
});
