import { Client } from 'pg';
import { createTestEnvironment, processEnv, TestEnvironment } from '../support/environment';
import { freePort, ServiceProcess, startService } from '../support/processes';
import { RecordingServer, startRecordingServer } from '../support/recording-server';
import { waitFor } from '../support/wait-for';

/** The OTLP/JSON fields this test reads (OTLP specification, ExportTraceServiceRequest). */
interface ExportedTraces {
  resourceSpans: {
    resource: { attributes: { key: string; value: { stringValue?: string } }[] };
    scopeSpans: { spans: { traceId: string; name: string; attributes: { key: string; value: { stringValue?: string } }[] }[] }[];
  }[];
}

/**
 * docs/design.md §12.2 as deployed: the api and worker processes, started with
 * OTEL_EXPORTER_OTLP_ENDPOINT, export their spans over OTLP/HTTP to `<endpoint>/v1/traces`,
 * and the two processes' spans of one post event share one trace.
 */
// Generous: two processes start at once, on a machine that may be busy with other test files.
const START_TIMEOUT_MS = 60_000;

describe('with OTEL_EXPORTER_OTLP_ENDPOINT, the api and the worker export one trace', () => {
  let env: TestEnvironment;
  let db: Client;
  let collector: RecordingServer;
  let peer: RecordingServer;
  let api: ServiceProcess;
  let worker: ServiceProcess;
  let apiPort: number;

  beforeAll(async () => {
    [env, collector, peer] = await Promise.all([createTestEnvironment(), startRecordingServer(), startRecordingServer()]);
    db = new Client({ connectionString: env.databaseUrl });
    await db.connect();
    await db.query(`INSERT INTO webhook_endpoints (url, secret, events) VALUES ($1, 'exported-trace-secret', '{post.created}')`, [`${peer.url}/hooks`]);
    apiPort = await freePort();
    const workerPort = await freePort();
    const shared = processEnv(env, { LOG_LEVEL: 'warn', HOST: '127.0.0.1', OTEL_EXPORTER_OTLP_ENDPOINT: collector.url });
    // Each is kept as soon as it is up, so afterAll stops it even when the other failed.
    await Promise.all([
      startService('api-b', 'dist/services/api/src/server.js', { ...shared, API_LAYOUT: 'b', PORT: String(apiPort) }, apiPort, START_TIMEOUT_MS).then(
        (started) => (api = started),
      ),
      startService('webhook-worker', 'dist/services/webhook-worker/src/main.js', { ...shared, WORKER_METRICS_PORT: String(workerPort) }, workerPort, START_TIMEOUT_MS).then(
        (started) => (worker = started),
      ),
    ]);
  }, 2 * START_TIMEOUT_MS);

  afterAll(async () => {
    await Promise.all([api?.stop('SIGKILL'), worker?.stop('SIGKILL')]);
    await Promise.all([collector?.close(), peer?.close()]);
    await db?.end();
    await env?.cleanup();
  });

  it('when a post event is delivered and both processes stop, then the collector holds the request and the attempt in one trace', async () => {
    const user = await db.query<{ user_id: number }>(
      `INSERT INTO users (user_name, user_email, api_token_hash)
       VALUES ('tracer', 'tracer@example.com', encode(sha256('exported-trace-token'), 'hex')) RETURNING user_id`,
    );
    const created = await fetch(`http://127.0.0.1:${apiPort}/api/v1/posts`, {
      method: 'POST',
      headers: { authorization: 'Bearer exported-trace-token', user_id: String(user.rows[0].user_id), 'content-type': 'application/json' },
      body: JSON.stringify({ title: 'exported', content: 'over OTLP' }),
    });
    expect(created.status).toBe(200);
    const [delivered] = await peer.waitForRequests(1, 30_000);
    const webhookId = delivered.headers['webhook-id'];
    await waitFor(
      async () => (await db.query('SELECT status FROM webhook_deliveries WHERE id = $1', [webhookId])).rows[0].status === 'succeeded',
      15_000,
      'the delivery to be recorded',
    );

    // A graceful stop flushes the batch of spans.
    expect(await Promise.all([api.stop('SIGTERM'), worker.stop('SIGTERM')])).toEqual([0, 0]);

    const exports = collector.requests.filter((request) => request.path === '/v1/traces');
    const spans = exports.flatMap((request) =>
      (JSON.parse(request.body.toString()) as ExportedTraces).resourceSpans.flatMap((resource) => {
        const service = resource.resource.attributes.find((attribute) => attribute.key === 'service.name')?.value.stringValue;
        return resource.scopeSpans.flatMap((scope) => scope.spans.map((span) => ({ ...span, service })));
      }),
    );
    const request = spans.find((span) => span.service === 'api-b' && span.name === 'POST /api/v1/posts');
    const attempt = spans.find(
      (span) => span.service === 'webhook-worker' && span.name === 'POST' && span.attributes.some((a) => a.key === 'webhook.id' && a.value.stringValue === webhookId),
    );
    expect(request).toBeDefined();
    expect(attempt?.traceId).toBe(request?.traceId);
  }, 60_000);
});
