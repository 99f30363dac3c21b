import { createDatabase, Database } from '../../shared/db';
import { createUser } from '../support/factories';
import { createMigratedDatabase, startPrimaryWithStandby, type PrimaryWithStandby } from '../support/own-postgres';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy';
import { ApiClient, ApiHarness, createApiHarness } from './support/api-harness';
import { createServiceKey, TestServiceKey } from './support/operations';

/**
 * docs/design.md §13.3: the operations API's lists and stats read a real streaming
 * replica (pg_basebackup -R, asynchronous), unless it is away, lagging or failing, or the
 * principal just wrote. A replica whose replay is paused shows what the primary had when it
 * paused: a list that misses a row the primary has was read on the replica.
 */
let cluster: PrimaryWithStandby;
let harness: ApiHarness;
let primary: Database;
let writer: TestServiceKey;
let reader: TestServiceKey;
/** REPLICA_MAX_LAG_S 60: a paused replica is still read. */
let patient: ApiClient;
/** Another api process with REPLICA_MAX_LAG_S 60. */
let patientB: ApiClient;
/** REPLICA_MAX_LAG_S 1: a paused replica is soon too far behind. */
let strict: ApiClient;

beforeAll(async () => {
  cluster = await startPrimaryWithStandby({ synchronous: false });
  const primaryUrl = await createMigratedDatabase(cluster.primary, 'replica_reads');
  primary = createDatabase(primaryUrl, { poolMax: 2 });
  writer = await createServiceKey(primary, ['*']);
  reader = await createServiceKey(primary, ['endpoints:read', 'webhooks:read']);
  await cluster.caughtUp();
  harness = await createApiHarness();
  const config = { databaseUrl: primaryUrl, databaseReplicaUrl: cluster.standby.url('replica_reads') };
  patient = await harness.start('a', { ...config, replicaMaxLagS: 60 });
  patientB = await harness.start('b', { ...config, replicaMaxLagS: 60 });
  strict = await harness.start('b', { ...config, replicaMaxLagS: 1 });
}, 90_000);

afterAll(async () => {
  await harness?.close();
  await primary?.close();
  await cluster?.destroy();
});

afterEach(async () => {
  await cluster.standby.start().catch(() => undefined);
  await cluster.restoreReplication();
  await cluster.resumeReplay().catch(() => undefined);
  await cluster.caughtUp();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** `db_replica_skipped_total` of the api, by reason. */
async function skipped(api: ApiClient): Promise<Record<string, number>> {
  const text = (await api.request({ url: '/metrics' })).body;
  const counts: Record<string, number> = {};
  for (const match of text.matchAll(/^db_replica_skipped_total\{reason="(\w+)"[^}]*\} (\d+)/gm)) counts[match[1]] = Number(match[2]);
  return counts;
}

const eventTypeNames = async (api: ApiClient, key: TestServiceKey): Promise<string[]> => {
  const response = await api.request({ url: '/api/v1/event-types', headers: key.headers });
  expect(response.statusCode).toBe(200);
  return (response.json().data as { name: string }[]).map((type) => type.name);
};

async function addEventType(api: ApiClient, name: string): Promise<void> {
  expect((await api.request({ method: 'POST', url: '/api/v1/event-types', headers: writer.headers, payload: { name } })).statusCode).toBe(201);
}

/** Waits out the write's read-your-writes window (REPLICA_MAX_LAG_S of `patient`'s peer, 1 s) and the lag cache. */
const afterWindows = () => sleep(2_200);

describe('read replicas (docs/design.md §13.3)', () => {
  it('when the replica is behind within REPLICA_MAX_LAG_S, then another principal’s lists and stats read it, and the writer’s own read the primary', async () => {
    await cluster.pauseReplay();
    await addEventType(patient, 'invoice.paid');
    const created = await patient.request({ method: 'POST', url: '/api/v1/endpoints', headers: writer.headers, payload: { url: 'https://example.com/hook' } });
    expect(created.statusCode).toBe(201);
    const send = await patient.request({
      method: 'POST',
      url: '/api/v1/webhooks',
      headers: writer.headers,
      payload: { url: 'https://example.com/ad-hoc', event: 'ad.hoc', payload: { n: 1 }, secret: 'whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQ=' },
    });
    expect(send.statusCode).toBe(202);

    // The writer sees what it just wrote, on every api process.
    expect(await eventTypeNames(patientB, writer)).toContain('invoice.paid');
    expect((await patientB.request({ url: '/api/v1/webhooks', headers: writer.headers })).json().data.map((d: { id: string }) => d.id)).toContain(send.json().id);

    // Another principal reads the paused replica, which has none of it yet.
    expect(await eventTypeNames(patient, reader)).not.toContain('invoice.paid');
    expect((await patient.request({ url: '/api/v1/webhooks', headers: reader.headers })).json().data).toEqual([]);
    expect((await patient.request({ url: '/api/v1/stats', headers: reader.headers })).json()).toMatchObject({ endpoints: 0 });
    // A single object is read on the primary.
    expect((await patient.request({ url: `/api/v1/webhooks/${send.json().id}`, headers: reader.headers })).statusCode).toBe(200);

    await cluster.resumeReplay();
    await cluster.caughtUp();
    expect(await eventTypeNames(patient, reader)).toContain('invoice.paid');
    expect((await patient.request({ url: '/api/v1/stats', headers: reader.headers })).json()).toMatchObject({ endpoints: 1 });
  });

  it('when the replica lags more than REPLICA_MAX_LAG_S, then lists read the primary and `lagging` is counted; once it catches up, the replica again', async () => {
    const before = await skipped(strict);
    await cluster.pauseReplay();
    await addEventType(patient, 'invoice.lagging');
    await afterWindows();

    expect(await eventTypeNames(strict, reader)).toContain('invoice.lagging');
    expect((await skipped(strict)).lagging).toBeGreaterThan(before.lagging ?? 0);
    // The patient api still reads the replica: 60 s is not reached.
    expect(await eventTypeNames(patient, reader)).not.toContain('invoice.lagging');

    await cluster.resumeReplay();
    await cluster.caughtUp();
    await afterWindows();
    const caughtUp = await skipped(strict);
    expect(await eventTypeNames(strict, reader)).toContain('invoice.lagging');
    expect(await skipped(strict)).toEqual(caughtUp);
  });

  it('when the replica stopped receiving WAL, then it counts as lagging: lists read the primary and show what was just written, and `lagging` is counted', async () => {
    await cluster.cutReplication();
    const before = await skipped(strict);
    // Everything it received is replayed: only the primary's position shows what it misses.
    await addEventType(patient, 'invoice.unreceived');
    await afterWindows();

    expect(await eventTypeNames(strict, reader)).toContain('invoice.unreceived');
    expect((await skipped(strict)).lagging).toBeGreaterThan(before.lagging ?? 0);
    // The patient api reads the replica, which never received it.
    expect(await eventTypeNames(patient, reader)).not.toContain('invoice.unreceived');

    await cluster.restoreReplication();
    await cluster.caughtUp();
    await afterWindows();
    const caughtUp = await skipped(strict);
    expect(await eventTypeNames(strict, reader)).toContain('invoice.unreceived');
    expect(await skipped(strict)).toEqual(caughtUp);
  });

  it('when the replica is stopped, then lists and stats still answer 200 from the primary and `unreachable` is counted; when it is back, it is read again', async () => {
    await addEventType(patient, 'invoice.unreachable');
    await cluster.caughtUp();
    await afterWindows();
    const before = await skipped(patient);
    await cluster.standby.stopImmediately();

    // Several at once: they share one measure of the replica, and each is answered.
    const urls = ['/api/v1/event-types', '/api/v1/webhooks', '/api/v1/stats?series=1h'].flatMap((url) => [url, url, url]);
    const statuses = await Promise.all(urls.map(async (url) => [url, (await patient.request({ url, headers: reader.headers })).statusCode]));
    expect(statuses).toEqual(urls.map((url) => [url, 200]));
    expect(await eventTypeNames(patient, reader)).toContain('invoice.unreachable');
    expect((await skipped(patient)).unreachable).toBe((before.unreachable ?? 0) + urls.length + 1);

    await cluster.standby.start();
    await cluster.caughtUp();
    let served = false;
    for (const deadline = Date.now() + 10_000; !served && Date.now() < deadline; await sleep(200)) {
      const counts = await skipped(patient);
      await eventTypeNames(patient, reader);
      served = JSON.stringify(await skipped(patient)) === JSON.stringify(counts);
    }
    expect(served).toBe(true);
  });
});

describe('the endpoint list on a replica (docs/design.md §13.3)', () => {
  it('when a user creates an endpoint, then their own list and its stats show it at once on any api process, while an operator’s list reads the replica without it until it catches up', async () => {
    const user = await createUser(primary);
    await cluster.caughtUp();
    await cluster.pauseReplay();
    const created = await patient.request({ method: 'POST', url: '/api/v1/endpoints', headers: user.headers, payload: { url: 'https://example.com/mine' } });
    expect(created.statusCode).toBe(201);
    const id = created.json().id as number;
    const listed = async (api: ApiClient, headers: Record<string, string>) =>
      ((await api.request({ url: '/api/v1/endpoints?limit=100', headers })).json().data as { id: number }[]).map((endpoint) => endpoint.id);

    expect(await listed(patientB, user.headers)).toEqual([id]);
    expect((await patientB.request({ url: `/api/v1/endpoints/${id}/stats`, headers: user.headers })).statusCode).toBe(200);
    expect(await listed(patient, reader.headers)).not.toContain(id);

    await cluster.resumeReplay();
    await cluster.caughtUp();
    expect(await listed(patient, reader.headers)).toContain(id);
    expect((await patient.request({ url: `/api/v1/endpoints/${id}/stats`, headers: reader.headers })).statusCode).toBe(200);
  });
});

describe('a replica that fails', () => {
  let proxy: TcpProxy;
  let flaky: ApiClient;
  let misnamed: ApiClient;

  beforeAll(async () => {
    proxy = await startTcpProxy({ host: '127.0.0.1', port: cluster.standby.port });
    const config = { databaseUrl: cluster.primary.url('replica_reads'), replicaMaxLagS: 60 };
    flaky = await harness.start('a', { ...config, databaseReplicaUrl: `postgres://postgres@127.0.0.1:${proxy.port}/replica_reads` });
    misnamed = await harness.start('b', { ...config, databaseReplicaUrl: cluster.standby.url('no_such_database') });
  });

  afterAll(() => proxy.close());

  it('when the replica loses the connection in the middle of a list, then the primary answers it, not a 500', async () => {
    proxy.dropOn('ORDER BY d.created_at DESC');
    const before = await skipped(flaky);
    const response = await flaky.request({ url: '/api/v1/webhooks', headers: reader.headers });
    expect(response.statusCode).toBe(200);
    expect((await skipped(flaky)).unreachable).toBe((before.unreachable ?? 0) + 1);
  });

  it('when the replica refuses the connection (no such database), then the primary answers and `error` is counted', async () => {
    const response = await misnamed.request({ url: '/api/v1/event-types', headers: reader.headers });
    expect(response.statusCode).toBe(200);
    expect((await skipped(misnamed)).error).toBe(1);
  });
});
