import { existsSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import Redis from 'ioredis';
import { buildApp as buildReceiver } from '../../services/receiver/src/app';
import { WebhookRequest } from '../../shared/webhook';
import { type ApiClient, type ApiHarness, createApiHarness } from '../api/support/api-harness';
import { type TestUser, createUser } from '../support/factories';

const SECRET = 'whsec_dXNlci1kZWxldGVkLXJlY2VpdmVyLXNlY3JldA==';
const PNG = Buffer.concat([Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex'), Buffer.alloc(64, 1)]);

describe('receiver: user.deleted removes the posts as the api does', () => {
  let harness: ApiHarness;
  let layoutA: ApiClient;
  let receiver: FastifyInstance;
  let receiverUrl: string;
  let redis: Redis;
  let author: TestUser;
  let reader: TestUser;

  beforeAll(async () => {
    harness = await createApiHarness({ RECEIVER_SECRET: SECRET });
    layoutA = await harness.start('a');
    receiver = await buildReceiver({ ...harness.env.config, service: 'receiver', uploadDir: harness.uploadDir });
    await receiver.listen({ host: '127.0.0.1', port: 0 });
    receiverUrl = `http://127.0.0.1:${(receiver.server.address() as AddressInfo).port}`;
    redis = new Redis(harness.env.redisUrl);
    author = await createUser(harness.db);
    reader = await createUser(harness.db);
  });

  afterAll(async () => {
    redis?.disconnect();
    await receiver?.close();
    await harness?.close();
  });

  async function createPostWithImage(title: string, owner: TestUser = author): Promise<{ pid: number; file: string }> {
    const form = new FormData();
    form.append('title', title);
    form.append('body', 'Deleted with its author');
    form.append('userId', String(owner.user.userId));
    form.append('image', new Blob([PNG], { type: 'image/png' }), 'photo.png');
    const created = await layoutA.request({ method: 'POST', url: '/api/v1/posts/create', payload: form, headers: owner.headers });
    expect(created.statusCode).toBe(200);
    const { postId, image } = created.json().item;
    return { pid: Number(postId), file: path.basename(new URL(image).pathname) };
  }

  const readThroughA = (pid: number) => layoutA.request({ url: `/api/v1/posts/${pid}`, headers: reader.headers });

  it('when user.deleted arrives, then Layout A stops serving the cached posts at once, the images leave UPLOAD_DIR and post.deleted events wait in the outbox', async () => {
    const posts = [await createPostWithImage('First'), await createPostWithImage('Second')];
    for (const { pid } of posts) expect((await readThroughA(pid)).statusCode).toBe(200);
    expect(await redis.exists(`${harness.env.redisPrefix}:posts:post:${posts[0].pid}`)).toBe(1);
    for (const { file } of posts) expect(existsSync(path.join(harness.uploadDir, file))).toBe(true);
    await harness.db.sequelize.query(`INSERT INTO webhook_endpoints (url, secret, events) VALUES ('http://127.0.0.1:9/gone', '${SECRET}', '{post.deleted}')`);

    const answer = await new WebhookRequest(`${receiverUrl}/webhooks/users`)
      .setPayload({ user_id: author.user.userId })
      .setEvent('user.deleted')
      .sign(SECRET)
      .send();

    expect(answer.data).toEqual({ status: 'OK', message: 'Accepted' });
    for (const { pid, file } of posts) {
      expect((await readThroughA(pid)).statusCode).toBe(204);
      expect(existsSync(path.join(harness.uploadDir, file))).toBe(false);
    }
    const [events] = await harness.db.sequelize.query(
      "SELECT e.body FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id WHERE d.event = 'post.deleted' AND d.status = 'pending' ORDER BY e.body",
    );
    expect((events as { body: string }[]).map((row) => JSON.parse(row.body)._data.pid).sort()).toEqual(posts.map((p) => p.pid).sort());
  });

  it('when the deletion fails and rolls back, then the posts, their cache entries and their images stay', async () => {
    const owner = await createUser(harness.db);
    const { pid, file } = await createPostWithImage('Kept', owner);
    expect((await readThroughA(pid)).statusCode).toBe(200);
    // A trigger makes the user's own DELETE fail after the posts went, inside the same transaction.
    await harness.db.sequelize.query(`
      CREATE FUNCTION refuse_user_delete() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$;
      CREATE TRIGGER refuse_user_delete BEFORE DELETE ON users FOR EACH ROW EXECUTE FUNCTION refuse_user_delete();`);
    try {
      const hook = new WebhookRequest(`${receiverUrl}/webhooks/users`).setPayload({ user_id: owner.user.userId }).setEvent('user.deleted').sign(SECRET);
      await expect(hook.send()).rejects.toMatchObject({ status: 500 });
    } finally {
      await harness.db.sequelize.query('DROP TRIGGER refuse_user_delete ON users; DROP FUNCTION refuse_user_delete();');
    }
    expect(await redis.exists(`${harness.env.redisPrefix}:posts:post:${pid}`)).toBe(1);
    expect((await readThroughA(pid)).statusCode).toBe(200);
    expect(existsSync(path.join(harness.uploadDir, file))).toBe(true);
  });
});
