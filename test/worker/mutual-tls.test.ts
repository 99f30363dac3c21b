import type { Config } from '../../shared/config';
import { OPERATOR, createEndpoint, updateEndpoint } from '../../shared/operations';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { ForwardProxy, startForwardProxy } from '../support/forward-proxy';
import { RecordingServer, startRecordingServer } from '../support/recording-server';
import { certificateMaker, TestCertificate } from '../support/test-certificates';
import { TEST_TLS, trustTestCertificate } from '../support/tls-fixture';
import { startTokenServer } from '../support/token-server';
import { createProducer, deliveryRows, Producer, recordEvent, resetAndClose, startWorker } from './support/harness';
import { waitFor } from '../support/wait-for';

/**
 * docs/design.md §14.4, `client_certificate`: the worker presents an endpoint's certificate
 * for mutual TLS to that endpoint only, against an https receiver of the test's own that
 * requires a certificate from a CA made here.
 */
describe('webhook worker: mutual TLS toward an endpoint', () => {
  let env: TestEnvironment;
  let producer: Producer;
  let receiver: RecordingServer;
  let proxy: ForwardProxy | undefined;
  let restoreCAs: () => void;
  let alpha: TestCertificate;
  let beta: TestCertificate;
  let gamma: TestCertificate;
  let clientCa: TestCertificate;
  const workers: { close(): Promise<void> }[] = [];

  beforeAll(async () => {
    env = await createTestEnvironment({ WEBHOOK_RETRY_SCHEDULE: '0.05', WEBHOOK_TIMEOUT_MS: '3000' }, 'worker');
    restoreCAs = trustTestCertificate();
    const certs = certificateMaker();
    clientCa = certs.authority('Receiver client CA');
    [alpha, beta, gamma] = ['alpha.sender', 'beta.sender', 'gamma.sender'].map((name) => certs.client(name, { issuer: clientCa }));
  });

  beforeEach(async () => {
    producer = createProducer(env.config);
    await producer.queue.waitUntilReady();
    receiver = await startRecordingServer({ status: 204 }, { tls: { ...TEST_TLS, clientCa: clientCa.cert } });
  });

  afterEach(async () => {
    await Promise.all(workers.splice(0).map((worker) => worker.close()));
    await resetAndClose(producer);
    await Promise.all([receiver.close(), proxy?.close()]);
    proxy = undefined;
  });

  afterAll(async () => {
    restoreCAs();
    await env.cleanup();
  });

  const run = (overrides: Partial<Config> = {}) => workers.push(startWorker({ ...env.config, ...overrides }, producer.db));
  const addEndpoint = async (path: string, certificate: TestCertificate | null, auth?: object) =>
    (await createEndpoint(producer.db, { url: `https://localhost:${receiver.port}${path}`, userId: null, clientCertificate: certificate, auth })).endpoint.id;
  const settled = (count: number) =>
    waitFor(
      async () => {
        const rows = await deliveryRows(producer.db);
        return rows.length === count && rows.every((row) => row.status === 'succeeded' || row.status === 'failed') && rows;
      },
      15_000,
      `${count} settled deliveries`,
    );
  const byEndpoint = async () => {
    const rows = await deliveryRows(producer.db);
    return (id: number) => rows.filter((row) => row.endpointId === id).map((row) => [row.status, row.lastStatusCode]);
  };

  it('when the receiver requires a client certificate, then the endpoint without one is refused and the endpoint with one is delivered, presenting it', async () => {
    const without = await addEndpoint('/plain', null);
    const withCert = await addEndpoint('/mtls', alpha);
    run();

    await recordEvent(producer, 'post.created');

    await settled(2);
    const of = await byEndpoint();
    expect(of(without)).toEqual([['failed', null]]);
    expect(of(withCert)).toEqual([['succeeded', 204]]);
    expect(receiver.requests.map((request) => [request.path, request.clientCertificate])).toEqual([['/mtls', 'alpha.sender']]);
  });

  it('when endpoints of one origin have different certificates or none, then every request presents its own endpoint\'s, however many go at once', async () => {
    const a = await addEndpoint('/a', alpha);
    const b = await addEndpoint('/b', beta);
    const none = await addEndpoint('/none', null);
    run({ webhookRetrySchedule: [] });

    for (let i = 0; i < 6; i += 1) await recordEvent(producer, 'post.created');

    await settled(18);
    const of = await byEndpoint();
    expect([of(a), of(b), of(none)]).toEqual([Array(6).fill(['succeeded', 204]), Array(6).fill(['succeeded', 204]), Array(6).fill(['failed', null])]);
    const presented = new Set(receiver.requests.map((request) => `${request.path} ${request.clientCertificate}`));
    expect([...presented].sort()).toEqual(['/a alpha.sender', '/b beta.sender']);
  });

  it('when an egress proxy is set, then the certificate is presented inside the CONNECT tunnel and the proxy sees only the CONNECT', async () => {
    proxy = await startForwardProxy();
    const id = await addEndpoint('/tunnelled', alpha);
    run({ webhookProxyUrl: proxy.url });

    await recordEvent(producer, 'post.created');
    await recordEvent(producer, 'post.updated');

    await settled(2);
    expect((await byEndpoint())(id)).toEqual([
      ['succeeded', 204],
      ['succeeded', 204],
    ]);
    expect(receiver.requests.map((request) => [request.clientCertificate, request.headers.via])).toEqual([
      ['alpha.sender', undefined],
      ['alpha.sender', undefined],
    ]);
    expect(proxy.requests.every((request) => request.method === 'CONNECT' && request.target === `localhost:${receiver.port}`)).toBe(true);
  });

  it('when the endpoint also has auth, then the token URL gets no certificate while the endpoint gets both the certificate and the token', async () => {
    const tokens = await startTokenServer({ id: 'sender', secret: 'secret' }, { tls: TEST_TLS });
    try {
      receiver.setReply((request) => (tokens.accepts(request.headers.authorization) ? { status: 204 } : { status: 401 }));
      await addEndpoint('/both', alpha, { type: 'oauth2_client_credentials', token_url: tokens.url, client_id: 'sender', client_secret: 'secret' });
      run();

      await recordEvent(producer, 'post.created');

      const [row] = await settled(1);
      expect(row.status).toBe('succeeded');
      expect(tokens.requests.map((request) => request.clientCertificate)).toEqual([null]);
      expect(receiver.requests.map((request) => [request.clientCertificate, tokens.accepts(request.headers.authorization)])).toEqual([['alpha.sender', true]]);
    } finally {
      await tokens.close();
    }
  });

  it('when the endpoint\'s certificate is replaced, then the next delivery presents the new one, not a pooled connection of the old', async () => {
    const id = await addEndpoint('/renewed', alpha);
    run();
    await recordEvent(producer, 'post.created');
    await settled(1);

    await updateEndpoint(producer.db, id, OPERATOR, { clientCertificate: gamma });
    await recordEvent(producer, 'post.updated');

    await settled(2);
    expect(receiver.requests.map((request) => request.clientCertificate)).toEqual(['alpha.sender', 'gamma.sender']);
  });
});
