import { Queue } from 'bullmq';
import { createRedis } from '../../shared/redis';
import { MAINTENANCE_QUEUE_NAME, RETENTION_SCHEDULER_ID, createRetention } from '../../services/webhook-worker/src/retention';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { Producer, createProducer, eventually, silentLogger, startWorker } from './support/harness';

const DAY_MS = 86_400_000;

describe('retention (DESIGN §11)', () => {
  let env: TestEnvironment;
  let producer: Producer;

  beforeAll(async () => {
    env = await createTestEnvironment({ WEBHOOK_RETENTION_DAYS: '30' }, 'worker');
    producer = createProducer(env.config);
    await producer.queue.waitUntilReady();
  });

  afterAll(async () => {
    await producer.queue.obliterate({ force: true });
    await producer.close();
    await env.cleanup();
  });

  async function addDelivery(id: string, status: string, ageDays: number): Promise<void> {
    const createdAt = new Date(Date.now() - ageDays * DAY_MS);
    await addEvent(`evt_${id}`, ageDays);
    await producer.db.models.WebhookDelivery.create({
      id,
      endpointId: null,
      url: 'http://127.0.0.1:9/x',
      event: 'post.created',
      eventId: `evt_${id}`,
      status: status as 'succeeded',
      createdAt,
    });
    await producer.db.models.WebhookAttempt.create({ deliveryId: id, attemptNumber: 1, statusCode: 200, durationMs: 5, responseBody: 'ok' } as never);
  }

  async function addEvent(id: string, ageDays: number): Promise<void> {
    await producer.db.sequelize.query(
      `INSERT INTO webhook_events (id, kind, event, body, created_at) VALUES ($1, 'post', 'post.created', '{}', now() - $2 * interval '1 day')`,
      { bind: [id, ageDays] },
    );
  }

  it('When the prune runs, then old succeeded deliveries, their attempts, old events no delivery needs and old inbox rows go, in bounded batches; the rest stays', async () => {
    for (let index = 0; index < 5; index += 1) await addDelivery(`msg_old_ok_${index}`, 'succeeded', 31);
    await addDelivery('msg_old_failed', 'failed', 90);
    await addDelivery('msg_old_pending', 'pending', 40);
    await addDelivery('msg_new_ok', 'succeeded', 29);
    await addEvent('evt_old_undelivered', 35);
    await addEvent('evt_new_undelivered', 2);
    await producer.db.sequelize.query(`
      INSERT INTO webhook_inbox (webhook_id, topic, event, received_at) VALUES
        ('msg_inbox_old_1', 'posts', 'post.created', now() - interval '31 days'),
        ('msg_inbox_old_2', 'posts', 'post.created', now() - interval '45 days'),
        ('msg_inbox_old_3', 'posts', 'post.created', now() - interval '60 days'),
        ('msg_inbox_new', 'posts', 'post.created', now() - interval '1 day')`);
    const retention = createRetention({ config: env.config, sequelize: producer.db.sequelize, logger: silentLogger, batchSize: 2, schedule: false });

    const result = await retention.prune();

    expect(result).toEqual({ deliveries: 5, events: 6, inbox: 3 });
    const kept = await producer.db.models.WebhookDelivery.findAll({ order: [['id', 'ASC']] });
    expect(kept.map((row) => row.id)).toEqual(['msg_new_ok', 'msg_old_failed', 'msg_old_pending']);
    const attempts = await producer.db.models.WebhookAttempt.findAll();
    expect(attempts.map((attempt) => attempt.deliveryId).sort()).toEqual(['msg_new_ok', 'msg_old_failed', 'msg_old_pending']);
    const [events] = await producer.db.sequelize.query('SELECT id FROM webhook_events ORDER BY id');
    expect(events).toEqual([{ id: 'evt_msg_new_ok' }, { id: 'evt_msg_old_failed' }, { id: 'evt_msg_old_pending' }, { id: 'evt_new_undelivered' }]);
    const [inbox] = await producer.db.sequelize.query('SELECT webhook_id FROM webhook_inbox ORDER BY webhook_id');
    expect(inbox).toEqual([{ webhook_id: 'msg_inbox_new' }]);
  });

  it('When two workers start, then one daily job scheduler exists, and the queues keep bounded job tails and event streams', async () => {
    const first = startWorker(env.config, producer.db);
    const second = startWorker(env.config, producer.db);
    const connection = createRedis(env.config, 'client');
    const maintenance = new Queue(MAINTENANCE_QUEUE_NAME, { connection, prefix: env.redisPrefix });
    try {
      const schedulers = await eventually(async () => {
        const found = await maintenance.getJobSchedulers();
        return found.length > 0 && found;
      }, 5_000, 'scheduler');
      await new Promise((resolve) => setTimeout(resolve, 300));

      expect((await maintenance.getJobSchedulers()).map((scheduler) => scheduler.key)).toEqual([RETENTION_SCHEDULER_ID]);
      expect(schedulers[0].pattern).toBe('17 3 * * *');
      expect(await connection.hget(`${env.redisPrefix}:webhooks:meta`, 'opts.maxLenEvents')).toBe('10000');
      expect(producer.queue.at(0).defaultJobOptions).toMatchObject({
        removeOnComplete: { age: 3_600, count: 1_000 },
        removeOnFail: { age: 7 * 24 * 3_600, count: 5_000 },
      });
    } finally {
      await maintenance.close();
      await first.close();
      await second.close();
      await connection.quit();
    }
  });
});
