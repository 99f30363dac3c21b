import {
  addDeliveryJobs,
  createWebhookQueue,
  shardKeyBase,
  shardOf,
  shardOfQueueName,
  shardQueueName,
  shardRecordKey,
  shardsToDrain,
} from '../../shared/queue';
import { gateKeys } from '../../shared/endpoint-gate';
import { createRedis, RedisClient } from '../../shared/redis';
import { createTestEnvironment, TestEnvironment } from '../support/environment';

describe('queue partitions (docs/design.md §13.1)', () => {
  it('when a gate key is hashed, then its partition is the same in every process and release', () => {
    // Fixed values: a change of the hash would move every endpoint's jobs and keys.
    expect(shardOf('e:1', 12)).toBe(10);
    expect(shardOf('e:2', 12)).toBe(1);
    expect(shardOf('e:60', 12)).toBe(9);
    expect(shardOf('o:https://example.com', 12)).toBe(5);
    expect(shardOf('e:1', 1)).toBe(0);
  });

  it('when 60 endpoints are spread over 12 partitions, then each partition gets between 3 and 8', () => {
    const counts = new Map<number, number>();
    for (let id = 1; id <= 60; id += 1) counts.set(shardOf(`e:${id}`, 12), (counts.get(shardOf(`e:${id}`, 12)) ?? 0) + 1);
    expect([...counts.keys()].sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
    for (const count of counts.values()) expect(count).toBeGreaterThanOrEqual(3);
    for (const count of counts.values()) expect(count).toBeLessThanOrEqual(8);
  });

  it('when the queue has one partition, then its keys and an endpoint gate keys are those of an unpartitioned system', () => {
    expect(shardQueueName(0)).toBe('webhooks');
    expect(gateKeys('pw', 'e:7').circuit).toBe('pw:webhooks:circuit:e:7');
    expect(gateKeys('{pw}', 'e:7').index).toBe('{pw}:webhooks:circuits');
  });

  it('when the queue has several partitions, then a partition queue and its endpoint keys carry its own hash tag', () => {
    expect(shardQueueName(3)).toBe('{webhooks-3}');
    expect(shardOfQueueName('{webhooks-3}')).toBe(3);
    expect(shardOfQueueName('webhooks')).toBe(0);
    expect(shardKeyBase('pw', 3)).toBe('pw:{webhooks-3}');
    const keys = gateKeys('pw', 'e:7', 3);
    for (const key of Object.values(keys)) expect(key.startsWith('pw:{webhooks-3}:')).toBe(true);
  });

  describe('with Redis', () => {
    let env: TestEnvironment;
    let redis: RedisClient;

    beforeAll(async () => {
      env = await createTestEnvironment();
      redis = createRedis(env.config, 'client');
    });

    afterAll(async () => {
      redis.disconnect();
      await env.cleanup();
    });

    it('when the count went from 4 to 2, then every partition up to 4 is drained, and the record is rebuilt when lost', async () => {
      const prefix = `${env.redisPrefix}drain`;
      const before = createWebhookQueue({ redisPrefix: prefix, webhookQueuePartitions: 4 }, redis);
      await before.waitUntilReady();
      await new Promise((resolve) => setTimeout(resolve, 100));
      await before.close();

      expect(await shardsToDrain(redis, prefix, 2)).toEqual([1, 2, 3, 4]);
      expect(await redis.get(shardRecordKey(prefix))).toBe('4');

      await redis.del(shardRecordKey(prefix));
      expect(await shardsToDrain(redis, prefix, 2)).toEqual([1, 2, 3, 4]);
      expect(await redis.get(shardRecordKey(prefix))).toBe('4');
      // Back to one partition: the unpartitioned queue is current again, the old ones still drained.
      expect(await shardsToDrain(redis, prefix, 1)).toEqual([0, 1, 2, 3, 4]);
    });

    it('when a job is looked up in the partition it sits in, then the lookup lists no partitions (a worker does so at every wake-up)', async () => {
      const queue = createWebhookQueue({ redisPrefix: `${env.redisPrefix}lookup`, webhookQueuePartitions: 1 }, redis);
      try {
        await queue.waitUntilReady();
        await addDeliveryJobs(queue, [{ deliveryId: 'whd_lookup', gate: 'e:1', delayMs: 60_000 }]);
        const exists = jest.spyOn(redis, 'exists');
        try {
          expect((await queue.getJob('whd_lookup', 0))?.id).toBe('whd_lookup');
          // Listing the partitions costs one EXISTS per possible partition (64): none here.
          expect(exists).not.toHaveBeenCalled();
          // Not there: every partition is looked at.
          expect(await queue.getJob('whd_missing', 0)).toBeUndefined();
          expect(exists).toHaveBeenCalled();
        } finally {
          exists.mockRestore();
        }
      } finally {
        await queue.obliterate({ force: true });
        await queue.close();
      }
    });

    it('when a system never had more than one partition, then only its unpartitioned queue is drained', async () => {
      expect(await shardsToDrain(redis, `${env.redisPrefix}single`, 1)).toEqual([0]);
    });
  });
});
