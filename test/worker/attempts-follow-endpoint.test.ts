import { QueryTypes } from 'sequelize';
import { readCircuitState } from '../../shared/endpoint-gate';
import { OPERATOR, getDeliveryDetails, redeliver, updateEndpoint } from '../../shared/operations';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { RecordingServer, startRecordingServer } from '../support/recording-server';
import { waitFor } from '../support/wait-for';
import { Producer, addEndpoint, createProducer, deliveryRows, recordEvent, resetAndClose, startWorker } from './support/harness';

/**
 * docs/design.md §6.3: attempts follow their endpoint. Each attempt goes to the endpoint's URL and
 * headers as they are when it starts and records its `url`; an answer counts for the endpoint
 * only at the origin it came from. Two real peers, A and B, on 127.0.0.1.
 */
describe('webhook worker: attempts follow their endpoint to its current URL', () => {
  let env: TestEnvironment;
  let producer: Producer;
  let a: RecordingServer;
  let b: RecordingServer;
  let running: ReturnType<typeof startWorker> | undefined;

  /** Envs of their own: one circuit that never opens, one that opens at the first failure. */
  const setUp = (breakerFailures: string) => {
    beforeAll(async () => {
      env = await createTestEnvironment({ WEBHOOK_RETRY_SCHEDULE: '0.4,0.4,0.4,0.4,0.4,0.4,0.4,0.4', WEBHOOK_BREAKER_FAILURES: breakerFailures }, 'worker');
    });
    beforeEach(async () => {
      producer = createProducer(env.config);
      await producer.queue.waitUntilReady();
      [a, b] = await Promise.all([startRecordingServer({ status: 500 }), startRecordingServer({ status: 200 })]);
    });
    afterEach(async () => {
      await running?.close();
      running = undefined;
      await resetAndClose(producer);
      await Promise.all([a.close(), b.close()]);
    });
    afterAll(async () => {
      await env.cleanup();
    });
  };

  const deps = () => ({ db: producer.db, queue: producer.queue });
  const operationalEvents = () =>
    producer.db.sequelize.query<{ event: string }>(`SELECT event FROM webhook_events WHERE kind = 'operational' ORDER BY created_at`, { type: QueryTypes.SELECT });
  const endpointAt = async (server: RecordingServer, headers: Record<string, string>) => {
    const endpoint = await addEndpoint(producer.db, `${server.url}/hooks`, { events: ['post.created'] });
    await producer.db.models.WebhookEndpoint.update({ headers }, { where: { id: endpoint.id } });
    return endpoint;
  };

  describe('retries and redeliveries', () => {
    setUp('1000');

    it('when a failing endpoint moves from A to B with new headers, then its pending retries arrive at B with B’s headers, A gets nothing more and never B’s authorization, and each attempt records its url', async () => {
      const endpoint = await endpointAt(a, { authorization: 'Basic QTpzZWNyZXQ=' });
      running = startWorker(env.config, producer.db);
      await recordEvent(producer, 'post.created');
      await a.waitForRequests(1);

      await updateEndpoint(producer.db, endpoint.id, OPERATOR, { url: `${b.url}/hooks?token=b-query-secret`, headers: { authorization: 'Bearer for-b', 'x-tenant': 'b' } }, deps());
      const atMove = a.requests.length;

      const [arrived] = await b.waitForRequests(1);
      const [delivery] = await deliveryRows(producer.db);
      expect(arrived.headers['webhook-id']).toBe(delivery.id);
      expect([arrived.path, arrived.rawQuery, arrived.headers.authorization, arrived.headers['x-tenant']]).toEqual(['/hooks', 'token=b-query-secret', 'Bearer for-b', 'b']);
      const details = await waitFor(async () => {
        const found = await getDeliveryDetails(producer.db, delivery.id, OPERATOR);
        return found?.status === 'succeeded' && found;
      }, 5_000, 'succeeded');
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(a.requests.length).toBe(atMove);
      expect(a.requests.map((request) => request.headers.authorization)).toEqual(Array(atMove).fill('Basic QTpzZWNyZXQ='));
      const urls = details.attempts.map((attempt) => attempt.url);
      // Shown as the delivery object shows URLs: the query value named like a token masked.
      expect(urls).toEqual([...Array(urls.length - 1).fill(`${a.url}/hooks`), `${b.url}/hooks?token=********`]);
      expect(urls.length).toBe(atMove + 1);
      expect(details.url).toBe(`${b.url}/hooks?token=********`);
    });

    it('when an old failed delivery of an endpoint that has since moved is redelivered, then it goes to the current URL with the current headers', async () => {
      const endpoint = await endpointAt(a, { authorization: 'Basic QTpzZWNyZXQ=' });
      running = startWorker(env.config, producer.db);
      await recordEvent(producer, 'post.created');
      await a.waitForRequests(1);
      const [delivery] = await deliveryRows(producer.db);
      // Its attempts used up: it ended failed at A.
      await waitFor(async () => (await deliveryRows(producer.db))[0].attempts >= 1, 5_000, 'attempt recorded');
      await producer.db.sequelize.query(`UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL WHERE id = $1`, { bind: [delivery.id] });
      await updateEndpoint(producer.db, endpoint.id, OPERATOR, { url: `${b.url}/hooks`, headers: { authorization: 'Bearer for-b' } }, deps());
      const atMove = a.requests.length;

      await redeliver(deps(), delivery.id, OPERATOR);

      const [arrived] = await b.waitForRequests(1);
      expect([arrived.headers['webhook-id'], arrived.headers.authorization]).toEqual([delivery.id, 'Bearer for-b']);
      const details = await waitFor(async () => {
        const found = await getDeliveryDetails(producer.db, delivery.id, OPERATOR);
        return found?.status === 'succeeded' && found;
      }, 5_000, 'succeeded');
      expect(details.url).toBe(`${b.url}/hooks`);
      expect(a.requests.length).toBe(atMove);
    });

    it('when a FIFO endpoint with a rate limit moves mid-line, then its deliveries keep their order across A and B and none is sent twice', async () => {
      const endpoint = await endpointAt(a, {});
      await producer.db.models.WebhookEndpoint.update({ ordering: 'fifo', rateLimitPerS: 10 }, { where: { id: endpoint.id } });
      a.setReply({ status: 200 });
      running = startWorker(env.config, producer.db);
      for (let i = 0; i < 20; i += 1) await recordEvent(producer, 'post.created');
      const ids = (await deliveryRows(producer.db)).sort((x, y) => Number(x.sequence) - Number(y.sequence)).map((row) => row.id);

      await a.waitForRequests(6, 10_000);
      await updateEndpoint(producer.db, endpoint.id, OPERATOR, { url: `${b.url}/hooks` }, deps());

      await waitFor(async () => (await deliveryRows(producer.db)).every((row) => row.status === 'succeeded'), 20_000, 'all delivered');
      const atA = a.requests.map((request) => String(request.headers['webhook-id']));
      const atB = b.requests.map((request) => String(request.headers['webhook-id']));
      expect(atB.length).toBeGreaterThan(0);
      expect([...atA, ...atB]).toEqual(ids);
    });
  });

  describe('answers of the origin it left', () => {
    setUp('1');

    it('when a 410 from A arrives after the endpoint moved to B, then B is not disabled and no endpoint.disabled or endpoint.failing goes out', async () => {
      await addEndpoint(producer.db, `${b.url}/watch`, { events: ['endpoint.disabled', 'endpoint.failing'] });
      const endpoint = await endpointAt(a, {});
      a.setReply({ status: 410, delayMs: 1_500 });
      running = startWorker(env.config, producer.db);
      await recordEvent(producer, 'post.created');
      await a.waitForRequests(1);

      await updateEndpoint(producer.db, endpoint.id, OPERATOR, { url: `${b.url}/hooks` }, deps());
      await waitFor(async () => (await deliveryRows(producer.db))[0]?.lastStatusCode === 410, 5_000, 'late 410 recorded');
      await recordEvent(producer, 'post.created');

      await waitFor(() => b.requests.some((request) => request.path === '/hooks'), 5_000, 'next event at B');
      await new Promise((resolve) => setTimeout(resolve, 500));
      const row = await producer.db.models.WebhookEndpoint.findByPk(endpoint.id);
      expect([row?.active, row?.disabledReason, row?.episodeId]).toEqual([true, null, null]);
      expect(await operationalEvents()).toEqual([]);
      expect(b.requests.filter((request) => request.path === '/watch')).toHaveLength(0);
      expect(await readCircuitState(producer.connection, env.redisPrefix, endpoint.id, env.config.webhookQueuePartitions, row?.originEpoch)).toBe('closed');
    });

    it('when failures from A arrive after the move and closing the circuit in Redis was lost, then B’s circuit does not open, no endpoint.failing goes out, and the retry arrives at B', async () => {
      await addEndpoint(producer.db, `${b.url}/watch`, { events: ['endpoint.disabled', 'endpoint.failing'] });
      const endpoint = await endpointAt(a, {});
      a.setReply({ status: 503, delayMs: 1_500 });
      running = startWorker(env.config, producer.db);
      await recordEvent(producer, 'post.created');
      await a.waitForRequests(1);
      const [delivery] = await deliveryRows(producer.db);

      // No deps: the circuit in Redis is left as it was.
      await updateEndpoint(producer.db, endpoint.id, OPERATOR, { url: `${b.url}/hooks` });

      const [retried] = await b.waitForRequests(1, 10_000);
      expect(retried.headers['webhook-id']).toBe(delivery.id);
      await recordEvent(producer, 'post.created');
      await waitFor(() => b.requests.filter((request) => request.path === '/hooks').length >= 2, 5_000, 'next event at B');
      const row = await producer.db.models.WebhookEndpoint.findByPk(endpoint.id);
      expect([row?.active, row?.episodeId, row?.consecutiveFailures]).toEqual([true, null, 0]);
      expect(await operationalEvents()).toEqual([]);
      expect(a.requests).toHaveLength(1);
      expect(await readCircuitState(producer.connection, env.redisPrefix, endpoint.id, env.config.webhookQueuePartitions, row?.originEpoch)).toBe('closed');
    });
  });
});
