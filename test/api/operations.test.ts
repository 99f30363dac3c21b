import type { AddressInfo } from 'node:net';
import { buildApp as buildReceiver } from '../../services/receiver/src/app';
import { createApiHarness, ApiHarness } from './support/api-harness';
import { createUser, TestUser } from '../support/factories';

/** The value of the first sample of `name` whose labels include `labels`, from Prometheus text. */
function sample(body: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of body.split('\n')) {
    const match = /^([a-z_]+)\{(.*)\} (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const found = Object.fromEntries([...match[2].matchAll(/(\w+)="([^"]*)"/g)].map(([, key, value]) => [key, value]));
    if (Object.entries(labels).every(([key, value]) => found[key] === value)) return Number(match[3]);
  }
  return undefined;
}

describe('operations: metrics and the queue dashboard', () => {
  let harness: ApiHarness;
  let alice: TestUser;

  beforeAll(async () => {
    harness = await createApiHarness();
    alice = await createUser(harness.db);
  });

  afterAll(async () => {
    await harness.close();
  });

  it.each(['a', 'b'] as const)('when /metrics is scraped on layout %s, then request durations, the queue and the outbox are reported', async (layout) => {
    const api = await harness.start(layout);
    await api.request({ url: '/api/v1/posts', headers: alice.headers });

    const res = await api.request({ url: '/metrics' });

    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    const service = `api-${layout}`;
    expect(sample(res.body, 'http_request_duration_seconds_count', { service, method: 'GET', route: '/api/v1/posts' })).toBe(1);
    expect(sample(res.body, 'webhook_outbox_pending', { service })).toBe(0);
    expect(sample(res.body, 'webhook_queue_jobs', { service, state: 'waiting', partition: '0' })).toBe(0);
    expect(res.body).toMatch(/^process_resident_memory_bytes/m);
  });

  it('when ADMIN_USER and ADMIN_PASSWORD are unset, then there is no dashboard', async () => {
    const api = await harness.start('a');
    expect((await api.request({ url: '/admin/queues' })).statusCode).not.toBe(200);
  });

  it('when the dashboard is set up, then it asks for basic credentials and opens with the right ones only', async () => {
    const api = await harness.start('a', { adminUser: 'ops', adminPassword: 'correct horse' });
    const basic = (user: string, password: string) => ({ authorization: 'Basic ' + Buffer.from(`${user}:${password}`).toString('base64') });

    const anonymous = await api.request({ url: '/admin/queues' });
    const wrong = await api.request({ url: '/admin/queues', headers: basic('ops', 'wrong') });
    const right = await api.request({ url: '/admin/queues', headers: basic('ops', 'correct horse') });
    const queues = await api.request({ url: '/admin/queues/api/queues', headers: basic('ops', 'correct horse') });

    expect(anonymous.statusCode).toBe(401);
    expect(anonymous.headers['www-authenticate']).toMatch(/^Basic realm="webhooks admin"/);
    expect(wrong.statusCode).toBe(401);
    expect(right.statusCode).toBe(200);
    expect(right.headers['content-type']).toMatch(/text\/html/);
    expect(queues.json().queues.map((queue: { name: string }) => queue.name)).toEqual(['webhooks']);
  });

  it('when the receiver is scraped, then it reports its own request durations', async () => {
    const receiver = await buildReceiver(harness.env.config);
    try {
      await receiver.listen({ host: '127.0.0.1', port: 0 });
      const base = `http://127.0.0.1:${(receiver.server.address() as AddressInfo).port}`;
      await fetch(`${base}/webhooks/posts`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
      const body = await (await fetch(`${base}/metrics`)).text();
      expect(sample(body, 'http_request_duration_seconds_count', { service: 'receiver', route: '/webhooks/posts', status_code: '500' })).toBe(1);
    } finally {
      await receiver.close();
    }
  });
});
