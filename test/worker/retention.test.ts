import { Queue } from 'bullmq';
import { QueryTypes } from 'sequelize';
import { createMetrics } from '../../shared/metrics';
import { createRedis } from '../../shared/redis';
import { MAINTENANCE_QUEUE_NAME, PruneResult, RETENTION_SCHEDULER_ID, createRetention } from '../../services/webhook-worker/src/retention';
import { redeliver } from '../../shared/operations/delivery-actions';
import { OPERATOR } from '../../shared/operations/viewer';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { ensureDays, idAt } from '../support/partitions';
import { Producer, createProducer, silentLogger, startWorker } from './support/harness';
import { waitFor } from '../support/wait-for';

const DAY_MS = 86_400_000;

describe('retention (docs/design.md §11.7)', () => {
  let env: TestEnvironment;
  let producer: Producer;

  beforeAll(async () => {
    // A check a second: a first check that met a busy table (its 1 s lock timeout) is soon tried again.
    env = await createTestEnvironment({ WEBHOOK_RETENTION_DAYS: '30', MAINTENANCE_INTERVAL_MS: '1000' }, 'worker');
    producer = createProducer(env.config);
    await producer.queue.waitUntilReady();
  });

  afterAll(async () => {
    await producer.queue.obliterate({ force: true });
    await producer.close();
    await env.cleanup();
  });

  const sequelize = () => producer.db.sequelize;
  const noonOf = (ageDays: number) => {
    const day = new Date(Date.now() - ageDays * DAY_MS);
    return new Date(Date.UTC(day.getUTCFullYear(), day.getUTCMonth(), day.getUTCDate(), 12));
  };
  const partitionsOf = async (day: Date): Promise<string[]> => {
    const stamp = day.toISOString().slice(0, 10).replace(/-/g, '');
    const rows = await sequelize().query<{ name: string }>(
      `SELECT relname AS name FROM pg_class WHERE relname IN ($1, $2, $3) ORDER BY relname`,
      { bind: [`webhook_attempts_p${stamp}`, `webhook_deliveries_p${stamp}`, `webhook_events_p${stamp}`], type: QueryTypes.SELECT },
    );
    return rows.map((row) => row.name);
  };

  /** An event made at `at` and one delivery of it per status, each with one attempt, as the api and worker write them. */
  async function addDay(at: Date, statuses: string[]): Promise<{ eventId: string; deliveryIds: string[] }> {
    await ensureDays(sequelize(), at);
    const eventId = idAt('evt_', at);
    await sequelize().query(
      `INSERT INTO webhook_events (id, created_at, kind, event, body) VALUES ($1, webhook_id_time($1), 'post', 'post.created', $2)`,
      { bind: [eventId, `{"_data":{"at":"${at.toISOString()}"}}`] },
    );
    const deliveryIds: string[] = [];
    for (const status of statuses) {
      const id = idAt('msg_', at);
      deliveryIds.push(id);
      await producer.db.models.WebhookDelivery.create({ id, endpointId: null, url: 'http://127.0.0.1:9/x', event: 'post.created', eventId, status: status as 'succeeded' });
      await producer.db.models.WebhookAttempt.create({ deliveryId: id, attemptNumber: 1, statusCode: 200, durationMs: 5, responseBody: 'ok' } as never);
    }
    return { eventId, deliveryIds };
  }

  it('When the prune runs, then each day past the window goes whole (attempts, deliveries, events), a day still delivering stays, failed ones dropped are counted, and a younger replay keeps its body', async () => {
    const oldDay = noonOf(40);
    const busyDay = noonOf(35);
    const recentDay = noonOf(29);
    const old = await addDay(oldDay, ['succeeded', 'failed', 'succeeded']);
    const busy = await addDay(busyDay, ['succeeded', 'pending']);
    const recent = await addDay(recentDay, ['succeeded']);
    // A replay made today of the old day's event: its delivery is younger than its event.
    const replayId = idAt('msg_', new Date());
    await producer.db.models.WebhookDelivery.create({ id: replayId, endpointId: null, url: 'http://127.0.0.1:9/x', event: 'post.created', eventId: old.eventId });
    await sequelize().query(`
      INSERT INTO webhook_inbox (webhook_id, topic, event, received_at) VALUES
        ('msg_inbox_old_1', 'posts', 'post.created', now() - interval '31 days'),
        ('msg_inbox_old_2', 'posts', 'post.created', now() - interval '45 days'),
        ('msg_inbox_old_3', 'posts', 'post.created', now() - interval '60 days'),
        ('msg_inbox_new', 'posts', 'post.created', now() - interval '1 day')`);
    const metrics = createMetrics('webhook-worker');
    const retention = createRetention({ config: env.config, sequelize: sequelize(), logger: silentLogger, metrics, batchSize: 2, schedule: false });

    const result = await retention.prune();
    await retention.close();

    expect(result).toEqual({ days: 1, daysKept: 1, deliveries: 3, failedDropped: 1, events: 0, inbox: 3 });
    expect(await partitionsOf(oldDay)).toEqual([]);
    expect(await partitionsOf(busyDay)).toHaveLength(3);
    const kept = await producer.db.models.WebhookDelivery.findAll();
    expect(kept.map((row) => row.id).sort()).toEqual([...busy.deliveryIds, ...recent.deliveryIds, replayId].sort());
    const attempts = await producer.db.models.WebhookAttempt.findAll();
    expect(attempts.map((attempt) => attempt.deliveryId).sort()).toEqual([...busy.deliveryIds, ...recent.deliveryIds].sort());
    const replay = await producer.db.models.WebhookDelivery.findByPk(replayId, { rejectOnEmpty: true });
    expect(replay.body).toBe(`{"_data":{"at":"${oldDay.toISOString()}"}}`);
    const [inbox] = await sequelize().query('SELECT webhook_id FROM webhook_inbox ORDER BY webhook_id');
    expect(inbox).toEqual([{ webhook_id: 'msg_inbox_new' }]);
    expect((await metrics.registry.getSingleMetric('webhook_retention_failed_dropped_total')?.get())?.values[0]?.value).toBe(1);
    expect((await metrics.registry.getSingleMetric('webhook_retention_days_kept')?.get())?.values[0]?.value).toBe(1);
  });

  it('When the tables are busy past the lock timeout, then the day stays for the next run and the prune does not wait', async () => {
    const oldDay = noonOf(50);
    await addDay(oldDay, ['succeeded']);
    const retention = createRetention({ config: env.config, sequelize: sequelize(), logger: silentLogger, lockTimeoutMs: 50, schedule: false });
    const blocker = await sequelize().transaction();
    try {
      await sequelize().query('LOCK TABLE webhook_events IN ROW EXCLUSIVE MODE', { transaction: blocker });
      const started = Date.now();
      const result = await retention.prune();
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(result.days).toBe(0);
      expect(await partitionsOf(oldDay)).toHaveLength(3);
    } finally {
      await blocker.rollback();
    }
    expect((await retention.prune()).days).toBe(1);
    expect(await partitionsOf(oldDay)).toEqual([]);
    await retention.close();
  });

  it('When a redeliver makes a row of the day pending between the prune’s first check and its detach, then the whole day stays and the redelivered row is kept', async () => {
    const oldDay = noonOf(42);
    const { deliveryIds } = await addDay(oldDay, ['failed', 'succeeded']);
    const retention = createRetention({ config: env.config, sequelize: sequelize(), logger: silentLogger, lockTimeoutMs: 10_000, schedule: false });
    // A transaction on the attempts table holds the detach (attempts first) after the first check has passed.
    const blocker = await sequelize().transaction();
    let pruning: Promise<PruneResult> | undefined;
    try {
      await sequelize().query('LOCK TABLE webhook_attempts IN ROW EXCLUSIVE MODE', { transaction: blocker });
      pruning = retention.prune();
      await waitFor(async () => {
        const [waiting] = await sequelize().query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%DETACH PARTITION%'`,
          { type: QueryTypes.SELECT },
        );
        return waiting.n > 0;
      }, 10_000, 'the detach waiting for its lock');
      // What POST /webhooks/{id}/redeliver runs: it answers 202 once this resolves.
      await redeliver({ db: producer.db, queue: producer.queue }, deliveryIds[0], OPERATOR);
    } finally {
      await blocker.rollback();
    }
    const result = await pruning;

    expect(result.days).toBe(0);
    expect(await partitionsOf(oldDay)).toHaveLength(3);
    const rows = await producer.db.models.WebhookDelivery.findAll({ where: { id: deliveryIds } });
    expect(rows.map((row) => [row.id, row.status]).sort()).toEqual(
      [
        [deliveryIds[0], 'pending'],
        [deliveryIds[1], 'succeeded'],
      ].sort(),
    );
    // Once the redelivery ended, the day goes at the next pass.
    await producer.queue.obliterate({ force: true });
    await producer.db.models.WebhookDelivery.update({ status: 'succeeded', oneShot: false }, { where: { id: deliveryIds[0] } });
    expect(await retention.prune()).toMatchObject({ days: 1, deliveries: 2 });
    expect(await partitionsOf(oldDay)).toEqual([]);
    await retention.close();
  });

  it('When a day was detached and not dropped (a crash between the two), then the next prune drops its tables and counts it', async () => {
    const oldDay = noonOf(44);
    await addDay(oldDay, ['succeeded', 'failed']);
    const stamp = oldDay.toISOString().slice(0, 10).replace(/-/g, '');
    for (const table of ['webhook_attempts', 'webhook_deliveries', 'webhook_events']) {
      await sequelize().query(`ALTER TABLE ${table} DETACH PARTITION ${table}_p${stamp}`);
    }
    const retention = createRetention({ config: env.config, sequelize: sequelize(), logger: silentLogger, schedule: false });

    const result = await retention.prune();
    await retention.close();

    expect(result).toMatchObject({ days: 1, deliveries: 2, failedDropped: 1 });
    expect(await partitionsOf(oldDay)).toEqual([]);
  });

  it('When a worker starts after days without one, then the day partitions through today + 7 exist again', async () => {
    const ahead = [6, 7].map((days) => new Date(Date.now() + days * DAY_MS));
    for (const day of ahead) {
      for (const name of await partitionsOf(day)) await sequelize().query(`DROP TABLE ${name}`);
      expect(await partitionsOf(day)).toEqual([]);
    }
    const running = startWorker(env.config, producer.db);
    try {
      for (const day of ahead) await waitFor(async () => (await partitionsOf(day)).length === 3, 10_000, 'partitions ahead');
    } finally {
      await running.close();
    }
  });

  it('When two workers start, then one daily job scheduler exists, and the queues keep bounded job tails and event streams', async () => {
    const first = startWorker(env.config, producer.db);
    const second = startWorker(env.config, producer.db);
    const connection = createRedis(env.config, 'client');
    const maintenance = new Queue(MAINTENANCE_QUEUE_NAME, { connection, prefix: env.redisPrefix });
    try {
      const schedulers = await waitFor(async () => {
        const found = await maintenance.getJobSchedulers();
        return found.length > 0 && found;
      }, 5_000, 'scheduler');
      await new Promise((resolve) => setTimeout(resolve, 300));

      expect((await maintenance.getJobSchedulers()).map((scheduler) => scheduler.key)).toEqual([RETENTION_SCHEDULER_ID]);
      expect(schedulers[0].pattern).toBe('17 3 * * *');
      expect(await connection.hget(`${env.redisPrefix}:webhooks:meta`, 'opts.maxLenEvents')).toBe('10000');
      expect(producer.queue.at(0).defaultJobOptions).toMatchObject({
        removeOnComplete: true,
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
