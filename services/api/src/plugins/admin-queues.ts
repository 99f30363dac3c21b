import { createHash, timingSafeEqual } from 'node:crypto';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import fastifyBasicAuth from '@fastify/basic-auth';
import type { FastifyPluginAsync } from 'fastify';
import { currentShards, type WebhookQueue } from '../../../../shared/queue';

export interface AdminQueuesOptions {
  queue: WebhookQueue;
  user: string;
  password: string;
}

/** The URL prefix of the Bull Board UI. */
export const ADMIN_QUEUES_PATH = '/admin/queues';

/** How often the board looks for partitions added since (a change of WEBHOOK_QUEUE_PARTITIONS), ms. */
const SHARDS_REFRESH_MS = 10_000;

/**
 * Bull Board for the `webhooks` queue, one entry per partition that may hold jobs (docs/design.md §13.1;
 * refreshed at most every 10 s as requests come), at {@link ADMIN_QUEUES_PATH}, behind HTTP Basic
 * authentication (RFC 7617) with ADMIN_USER / ADMIN_PASSWORD; every path under it answers
 * 401 with `WWW-Authenticate` until the caller sends those credentials.
 * Register it without a prefix; it is encapsulated, so its auth hook guards only its routes.
 */
export const adminQueuesPlugin: FastifyPluginAsync<AdminQueuesOptions> = async (app, { queue, user, password }) => {
  await app.register(fastifyBasicAuth, {
    authenticate: { realm: 'webhooks admin' },
    validate: async (givenUser, givenPassword) => {
      // Both compared in full, so the time taken says nothing about which one was wrong.
      const userMatches = safeEqual(givenUser, user);
      const passwordMatches = safeEqual(givenPassword, password);
      if (!userMatches || !passwordMatches) throw Object.assign(new Error('Invalid admin credentials.'), { statusCode: 401 });
    },
  });
  app.addHook('onRequest', app.basicAuth);
  const serverAdapter = new FastifyAdapter();
  serverAdapter.setBasePath(ADMIN_QUEUES_PATH);
  const adapters = async () => {
    // While Redis is away the current partitions stand in for every one.
    const shards = await queue.shards().catch(() => currentShards(queue.count));
    return shards.map((shard) => new BullMQAdapter(queue.at(shard)));
  };
  const board = createBullBoard({ queues: await adapters(), serverAdapter });
  let refreshedAt = Date.now();
  app.addHook('preHandler', async () => {
    if (Date.now() - refreshedAt < SHARDS_REFRESH_MS) return;
    refreshedAt = Date.now();
    board.replaceQueues(await adapters());
  });
  await app.register(serverAdapter.registerPlugin(), { prefix: ADMIN_QUEUES_PATH });
};

/**
 * Compares the sha256 digests of the two strings in constant time: digests have equal length
 * whatever was typed, so neither the comparison nor a length check reveals the secret's length.
 */
export function safeEqual(given: string, expected: string): boolean {
  return timingSafeEqual(sha256(given), sha256(expected));
}

const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest();
