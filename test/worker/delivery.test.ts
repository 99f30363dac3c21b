import { createHmac } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import type { Config } from '../../shared/config';
import { Metrics, createMetrics } from '../../shared/metrics';
import { enqueueWebhook } from '../../shared/deliveries/enqueue';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { RecordingServer, startRecordingServer } from '../support/recording-server';
import { addEndpoint, buildPostData, createProducer, deliveryRows, Producer, recordEvent, resetAndClose, startWorker } from './support/harness';
import { waitFor } from '../support/wait-for';

const STANDARD_SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

describe('webhook worker: delivery', () => {
  let env: TestEnvironment;
  let producer: Producer;
  let receiver: RecordingServer;
  let running: ReturnType<typeof startWorker> | undefined;

  beforeAll(async () => {
    env = await createTestEnvironment({ WEBHOOK_RETRY_SCHEDULE: '0.05,0.05', WEBHOOK_TIMEOUT_MS: '2000' }, 'worker');
  });

  beforeEach(async () => {
    producer = createProducer(env.config);
    await producer.queue.waitUntilReady();
    receiver = await startRecordingServer();
  });

  afterEach(async () => {
    await running?.close();
    running = undefined;
    await resetAndClose(producer);
    await receiver.close();
  });

  afterAll(async () => {
    await env.cleanup();
  });

  function run(config: Config = env.config, random?: () => number, metrics?: Metrics) {
    running = startWorker(config, producer.db, { random, metrics });
  }

  it('When a post event is recorded, then the endpoint receives the exact envelope bytes with headers that verify independently', async () => {
    const endpoint = await addEndpoint(producer.db, `${receiver.url}/hooks/posts`);
    const data = buildPostData();
    run();

    await recordEvent(producer, 'post.created', data);

    const [request] = await receiver.waitForRequests(1);
    const expectedBody = JSON.stringify({ _data: data, _config: { 'app.webhook.event': 'post.created', 'app.webhook.signable': 1 } });
    const [delivery] = await deliveryRows(producer.db);
    expect(request.method).toBe('POST');
    expect(request.path).toBe('/hooks/posts');
    expect(request.body.toString('utf8')).toBe(expectedBody);
    expect(request.headers['content-type']).toBe('application/json');
    expect(request.headers['webhook-id']).toBe(delivery.id);
    expect(Math.abs(Number(request.headers['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(30);
    expect(request.headers['x-signature']).toBe(createHmac('sha256', endpoint.secret).update(request.body).digest('hex'));
    const verified = new Webhook(endpoint.secret).verify(request.body.toString('utf8'), {
      'webhook-id': String(request.headers['webhook-id']),
      'webhook-timestamp': String(request.headers['webhook-timestamp']),
      'webhook-signature': String(request.headers['webhook-signature']),
    });
    expect(verified).toEqual(JSON.parse(expectedBody));
    await waitFor(async () => (await delivery.reload()).status === 'succeeded', 5_000, 'succeeded');
  });

  it("When the endpoint has static headers, then every delivery carries them beside the signature headers, which they cannot replace", async () => {
    const endpoint = await addEndpoint(producer.db, `${receiver.url}/hooks/with-headers`);
    // Stored as the API stores them (lowercase, checked); a reserved name slipped into the row by hand is still not sent.
    await producer.db.models.WebhookEndpoint.update(
      { headers: { authorization: 'Basic dXNlcjpwYXNz', 'x-tenant': 'acme', 'webhook-id': 'forged' } },
      { where: { id: endpoint.id } },
    );
    run();

    await recordEvent(producer, 'post.created', buildPostData());

    const [request] = await receiver.waitForRequests(1);
    const [delivery] = await deliveryRows(producer.db);
    expect(request.headers).toMatchObject({ authorization: 'Basic dXNlcjpwYXNz', 'x-tenant': 'acme', 'webhook-id': delivery.id });
    expect(new Webhook(endpoint.secret).verify(request.body.toString('utf8'), request.headers as Record<string, string>)).toBeDefined();
  });

  it('When another service enqueues the docs/design.md §7 vector, then the receiver gets its exact body and X-Signature', async () => {
    run();

    await enqueueWebhook(
      {
        url: `${receiver.url}/users`,
        event: 'user.registered',
        payload: { status: 'OK', user: { id: 42, email: 'user@example.com' } },
        secret: 'your-shared-secret',
        headers: { 'X-Tenant': 'acme', 'webhook-id': 'forged' },
      },
      producer,
    );

    const [request] = await receiver.waitForRequests(1);
    expect(request.body.toString('utf8')).toBe(
      '{"_data":{"status":"OK","user":{"id":42,"email":"user@example.com"}},"_config":{"app.webhook.event":"user.registered","app.webhook.signable":1}}',
    );
    expect(request.headers['x-signature']).toBe('7a578c485cdeedd8e4f2ebf78d8e944abd81ef08cacff81f53e4104f539ac9a0');
    expect(request.headers['x-tenant']).toBe('acme');
    expect(request.headers['webhook-id']).toMatch(/^msg_/);
  });

  it('When endpoints subscribe to different events, then only active subscribers of the event get a delivery', async () => {
    await addEndpoint(producer.db, `${receiver.url}/created`, { events: ['post.created'] });
    await addEndpoint(producer.db, `${receiver.url}/deleted`, { events: ['post.deleted'] });
    await addEndpoint(producer.db, `${receiver.url}/all`);
    await addEndpoint(producer.db, `${receiver.url}/inactive`, { active: false });
    run();

    await recordEvent(producer, 'post.created');

    await receiver.waitForRequests(2);
    const rows = await waitFor(async () => {
      const all = await deliveryRows(producer.db);
      return all.every((row) => row.status === 'succeeded') && all;
    });
    expect(rows.map((row) => new URL(row.url).pathname).sort()).toEqual(['/all', '/created']);
    expect(receiver.requests.map((request) => request.path).sort()).toEqual(['/all', '/created']);
  });

  it('When the endpoint answers 503, 503, 200, then three attempts carry one webhook-id, fresh signatures, and the attempt log matches', async () => {
    const endpoint = await addEndpoint(producer.db, `${receiver.url}/hooks`);
    receiver.replyOnce({ status: 503, body: 'busy one' });
    receiver.replyOnce({ status: 503, body: 'busy two' });
    receiver.setReply({ status: 200, body: 'thanks' });
    // 1.25 s between attempts (jitter pinned to 0) puts each attempt in a new second, so each
    // fresh timestamp gives a different signature.
    const metrics = createMetrics('webhook-worker');
    run({ ...env.config, webhookRetrySchedule: [1.25, 1.25] }, () => 0, metrics);

    await recordEvent(producer, 'post.updated');

    const requests = await receiver.waitForRequests(3, 10_000);
    const [delivery] = await deliveryRows(producer.db);
    expect(new Set(requests.map((request) => request.headers['webhook-id']))).toEqual(new Set([delivery.id]));
    expect(new Set(requests.map((request) => request.headers['webhook-signature'])).size).toBe(3);
    expect(new Set(requests.map((request) => request.body.toString('utf8'))).size).toBe(1);
    for (const request of requests) {
      expect(() =>
        new Webhook(endpoint.secret).verify(request.body, {
          'webhook-id': String(request.headers['webhook-id']),
          'webhook-timestamp': String(request.headers['webhook-timestamp']),
          'webhook-signature': String(request.headers['webhook-signature']),
        }),
      ).not.toThrow();
    }

    await waitFor(async () => (await delivery.reload()).status === 'succeeded', 5_000, 'succeeded');
    expect(delivery.attempts).toBe(3);
    expect(delivery.lastStatusCode).toBe(200);
    expect(delivery.deliveredAt).not.toBeNull();
    const attempts = await producer.db.models.WebhookAttempt.findAll({
      where: { deliveryId: delivery.id },
      order: [['attemptNumber', 'ASC']],
    });
    expect(attempts.map((a) => [a.attemptNumber, a.statusCode, a.responseBody, a.error])).toEqual([
      [1, 503, 'busy one', null],
      [2, 503, 'busy two', null],
      [3, 200, 'thanks', null],
    ]);
    expect(attempts.every((a) => a.durationMs >= 0)).toBe(true);
    // Counted once the record returned, which also closes the endpoint's failure episode.
    const outcomes = await waitFor(async () => {
      const values = (await metrics.deliveries.get()).values.map((v) => [v.labels.outcome, v.value]);
      return values.some(([outcome]) => outcome === 'succeeded') && values;
    }, 5_000, 'the success counted');
    expect(outcomes).toEqual(expect.arrayContaining([['retried', 2], ['succeeded', 1]]));
  });

  it('When the endpoint sends Retry-After, then the next attempt waits for it, within twice the scheduled delay', async () => {
    await addEndpoint(producer.db, `${receiver.url}/hooks`);
    receiver.replyOnce({ status: 503, headers: { 'Retry-After': '1' } });
    // Scheduled delay 500 ms (jitter pinned to its middle); Retry-After 1 s lies inside [500, 1000].
    run({ ...env.config, webhookRetrySchedule: [0.5] }, () => 0.5);

    await recordEvent(producer, 'post.created');

    const [first, second] = await receiver.waitForRequests(2, 5_000);
    expect(second.receivedAt - first.receivedAt).toBeGreaterThanOrEqual(1_000);
    const [delivery] = await deliveryRows(producer.db);
    await waitFor(async () => (await delivery.reload()).status === 'succeeded', 5_000, 'succeeded');
  });

  it('When the endpoint answers 410 Gone, then the delivery fails at once and the endpoint is disabled', async () => {
    const endpoint = await addEndpoint(producer.db, `${receiver.url}/gone`);
    receiver.setReply({ status: 410, body: 'gone' });
    run();

    await recordEvent(producer, 'post.deleted', { pid: 100001, uuid: '5f1c1b8e-6a4e-4c39-9d0a-2b7c3f1e9a10', user_id: 1 });

    const [delivery] = await waitFor(async () => {
      const rows = await deliveryRows(producer.db);
      return rows[0]?.status === 'failed' && rows;
    });
    const stored = await producer.db.models.WebhookEndpoint.findByPk(endpoint.id);
    expect(stored?.active).toBe(false);
    expect(stored?.disabledReason).toMatch(/^410 Gone/);
    expect(delivery.attempts).toBe(1);
    expect(delivery.lastStatusCode).toBe(410);
    expect(receiver.requests).toHaveLength(1);
  });

  it('When a delivery\'s event row is missing, then it fails at once with "event missing" and sends nothing, not an empty signed body', async () => {
    await addEndpoint(producer.db, `${receiver.url}/hooks`);
    await recordEvent(producer, 'post.created', buildPostData({ pid: 1 }));
    const [orphan] = await deliveryRows(producer.db);
    await producer.db.sequelize.query('DELETE FROM webhook_events WHERE id = $1', { bind: [orphan.eventId] });
    run();

    // A delivery recorded after it arrives: the worker has run the orphan's job by then.
    await recordEvent(producer, 'post.updated', buildPostData({ pid: 2 }));

    const rows = await waitFor(async () => {
      const all = await deliveryRows(producer.db);
      return all.every((row) => row.status === 'failed' || row.status === 'succeeded') && all;
    });
    expect(rows.map((row) => [row.event, row.status, row.attempts, row.lastError])).toEqual([
      ['post.created', 'failed', 0, 'event missing'],
      ['post.updated', 'succeeded', 1, null],
    ]);
    expect(receiver.requests.map((request) => JSON.parse(request.body.toString('utf8'))._data.pid)).toEqual([2]);
    expect(await producer.db.models.WebhookAttempt.count({ where: { deliveryId: orphan.id } })).toBe(0);
  });

  it('When every attempt fails, then the delivery ends failed after the schedule, keeping the first 2 KB of each answer', async () => {
    await addEndpoint(producer.db, `${receiver.url}/hooks`);
    receiver.setReply({ status: 500, body: 'x'.repeat(5_000) });
    run();

    await recordEvent(producer, 'post.created');

    const [delivery] = await waitFor(async () => {
      const rows = await deliveryRows(producer.db);
      return rows[0]?.status === 'failed' && rows;
    });
    expect(delivery.attempts).toBe(3);
    expect(delivery.nextAttemptAt).toBeNull();
    expect(receiver.requests).toHaveLength(3);
    const attempts = await producer.db.models.WebhookAttempt.findAll({ where: { deliveryId: delivery.id } });
    expect(attempts.map((a) => a.responseBody?.length)).toEqual([2048, 2048, 2048]);
  });

  it('When the endpoint does not answer in time, then the attempt records a timeout and the retry waits at least 60 s', async () => {
    await addEndpoint(producer.db, `${receiver.url}/slow`);
    receiver.setReply({ status: 200, delayMs: 1_000 });
    run({ ...env.config, webhookTimeoutMs: 200 });
    const before = Date.now();

    await recordEvent(producer, 'post.created');

    const [delivery] = await waitFor(async () => {
      const rows = await deliveryRows(producer.db);
      return rows[0]?.attempts === 1 && rows;
    });
    expect(delivery.status).toBe('pending');
    expect(delivery.lastError).toMatch(/^timeout/);
    expect(delivery.lastStatusCode).toBeNull();
    expect(delivery.nextAttemptAt!.getTime() - before).toBeGreaterThanOrEqual(60_000);
  });

  it('When the connection is reset once, then axios-retry resends within the same attempt', async () => {
    await addEndpoint(producer.db, `${receiver.url}/flaky`);
    receiver.replyOnce({ reset: true });
    run();

    await recordEvent(producer, 'post.created');

    const [delivery] = await waitFor(async () => {
      const rows = await deliveryRows(producer.db);
      return rows[0]?.status === 'succeeded' && rows;
    });
    expect(delivery.attempts).toBe(1);
    expect(receiver.requests).toHaveLength(2);
    expect(receiver.requests[0].headers['webhook-id']).toBe(receiver.requests[1].headers['webhook-id']);
  });

  it.each(['127.0.0.1', 'localhost'])(
    'When the SSRF guard is on and the target is %s, then nothing is sent and the delivery fails',
    async (host) => {
      await addEndpoint(producer.db, `http://${host}:${receiver.port}/internal`);
      run({ ...env.config, webhookBlockPrivate: true });

      await recordEvent(producer, 'post.created');

      const [delivery] = await waitFor(async () => {
        const rows = await deliveryRows(producer.db);
        return rows[0]?.status === 'failed' && rows;
      });
      expect(delivery.lastError).toBe(`Refused to deliver to ${host}: it resolves to a non-public address (SSRF guard).`);
      expect(delivery.attempts).toBe(1);
      expect(receiver.requests).toHaveLength(0);
    },
  );

  it('When a delivery has failed for good, then a redelivery makes exactly one new attempt with the same webhook-id', async () => {
    await addEndpoint(producer.db, `${receiver.url}/hooks`, { secret: STANDARD_SECRET });
    receiver.setReply({ status: 500 });
    run();
    await recordEvent(producer, 'post.created');
    const [delivery] = await waitFor(async () => {
      const rows = await deliveryRows(producer.db);
      return rows[0]?.status === 'failed' && rows;
    });
    receiver.setReply({ status: 500 });
    const { redeliverWebhook } = await import('../../shared/deliveries/enqueue');

    await redeliverWebhook(producer, delivery.id);

    await waitFor(async () => (await delivery.reload()).status === 'failed' && delivery.attempts === 4, 5_000, 'redelivery');
    expect(receiver.requests).toHaveLength(4);
    expect(new Set(receiver.requests.map((r) => r.headers['webhook-id']))).toEqual(new Set([delivery.id]));
  });

  it('When the BullMQ worker stops taking jobs and does not recover, then the watchdog replaces it and deliveries go on', async () => {
    await addEndpoint(producer.db, `${receiver.url}/hooks`);
    running = startWorker(env.config, producer.db, { watchdog: { intervalMs: 50, graceMs: 300 } });
    const { worker } = running;
    await waitFor(() => worker.isReady(), 5_000, 'worker ready');

    // BullMQ reconnects a dropped connection by itself; what the watchdog covers is a worker
    // left not running or not ready (BullMQ issue 3185), which closing its loop reproduces.
    await worker.current.close(true);

    await waitFor(() => worker.recreations === 1 && worker.isReady(), 5_000, 'worker recreated');
    await recordEvent(producer, 'post.created');
    const [request] = await receiver.waitForRequests(1);
    const [delivery] = await deliveryRows(producer.db);
    expect(request.headers['webhook-id']).toBe(delivery.id);
  });
});
