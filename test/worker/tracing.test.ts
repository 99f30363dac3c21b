import { SpanKind } from '@opentelemetry/api';
import { InMemorySpanExporter, ReadableSpan, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { QueryTypes } from 'sequelize';
import { startTracing, Tracing } from '../../shared/tracing';
import { ApiClient, ApiHarness, createApiHarness } from '../api/support/api-harness';
import { createUser, TestUser } from '../support/factories';
import { RecordingServer, startRecordingServer } from '../support/recording-server';
import { createProducer, Producer, startWorker } from './support/harness';
import { waitFor } from '../support/wait-for';

/**
 * docs/design.md §12.2: with tracing on, one trace runs from the api request through the delivery row
 * and the job to each HTTP attempt, tagged with the webhook-id. The api and the worker run
 * in this process, exporting to memory.
 */
describe('tracing from the api request to the HTTP attempt', () => {
  const memory = new InMemorySpanExporter();
  let tracing: Tracing | undefined;
  let harness: ApiHarness;
  let api: ApiClient;
  let user: TestUser;
  let peer: RecordingServer;
  let producer: Producer;

  beforeAll(async () => {
    tracing = await startTracing({ serviceName: 'test', spanProcessors: [new SimpleSpanProcessor(memory)] });
    [harness, peer] = await Promise.all([createApiHarness(), startRecordingServer()]);
    api = await harness.start('b');
    user = await createUser(harness.db);
    producer = createProducer(harness.env.config, { reviveAfterMs: 100 });
    await harness.db.sequelize.query(`INSERT INTO webhook_endpoints (url, secret, events) VALUES ($1, 'tracing-endpoint-secret', '{post.created}')`, {
      bind: [`${peer.url}/hooks`],
    });
  });

  afterAll(async () => {
    await producer?.close();
    await peer?.close();
    await harness?.close();
    await tracing?.shutdown();
  });

  beforeEach(() => memory.reset());

  /** Creates a post as a caller already inside trace `traceId`; returns the new delivery's id. */
  const createPost = async (traceId: string): Promise<string> => {
    const response = await api.request({
      method: 'POST',
      url: '/api/v1/posts',
      headers: { ...user.headers, traceparent: `00-${traceId}-00f067aa0ba902b7-01` },
      payload: { title: `traced ${traceId.slice(0, 6)}`, content: 'one trace' },
    });
    expect(response.statusCode).toBe(200);
    const rows = await harness.db.sequelize.query<{ id: string }>(
      `SELECT d.id FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id WHERE e.body LIKE $1`,
      { bind: [`%"pid":${response.json().pid}%`], type: QueryTypes.SELECT },
    );
    return rows[0].id;
  };

  const spansOf = (traceId: string) => memory.getFinishedSpans().filter((span) => span.spanContext().traceId === traceId);
  const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;

  it('when a post is created, then the request, the job and the attempt are one trace carrying the webhook-id', async () => {
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const worker = startWorker(harness.env.config, producer.db);
    try {
      const deliveryId = await createPost(traceId);
      await peer.waitForRequests(1, 20_000);
      // The job's span ends last, once the attempt is recorded.
      const job = (await waitFor(async () => spansOf(traceId).find((span) => span.kind === SpanKind.CONSUMER), 15_000, 'the job span'))!;
      const attempt = spansOf(traceId).find((span) => span.kind === SpanKind.CLIENT)!;

      const request = spansOf(traceId).find((span) => span.kind === SpanKind.SERVER)!;
      expect(request.name).toBe('POST /api/v1/posts');
      expect(request.attributes['webhook.ids']).toEqual([deliveryId]);
      expect(job.attributes['webhook.id']).toBe(deliveryId);
      expect(parentOf(job)).toBe(request.spanContext().spanId);
      expect(parentOf(attempt)).toBe(job.spanContext().spanId);
      expect(attempt.name).toBe('POST');
      expect(attempt.attributes).toMatchObject({ 'webhook.id': deliveryId, 'http.response.status_code': 200, 'url.full': `${peer.url}/hooks` });
      expect(peer.requests[0].headers['webhook-id']).toBe(deliveryId);
    } finally {
      await worker.close();
    }
  }, 60_000);

  it('when the job is lost from Redis and the outbox relay queues it again, then the attempt still joins the request trace', async () => {
    const traceId = '0af7651916cd43dd8448eb211c80319c';
    const deliveryId = await createPost(traceId);
    await waitFor(
      async () => (await producer.db.models.WebhookDelivery.findByPk(deliveryId))?.enqueuedAt,
      15_000,
      'the post-commit enqueue',
    );
    await producer.queue.remove(deliveryId);
    expect(await producer.queue.at(0).getJobState(deliveryId)).toBe('unknown');
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(await producer.outbox.relayOnce()).toMatchObject({ revived: 1 });

    const worker = startWorker(harness.env.config, producer.db);
    try {
      const job = (await waitFor(
        async () => spansOf(traceId).find((span) => span.kind === SpanKind.CONSUMER),
        30_000,
        'the span of the revived job',
      ))!;
      const attempt = spansOf(traceId).find((span) => span.kind === SpanKind.CLIENT)!;
      const request = spansOf(traceId).find((span) => span.kind === SpanKind.SERVER)!;
      expect(attempt.attributes).toMatchObject({ 'webhook.id': deliveryId, 'http.response.status_code': 200 });
      expect(parentOf(attempt)).toBe(job.spanContext().spanId);
      expect(parentOf(job)).toBe(request.spanContext().spanId);
    } finally {
      await worker.close();
    }
  }, 60_000);
});
