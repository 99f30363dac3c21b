import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { QueryTypes } from 'sequelize';
import { buildApp } from '../../services/api/src/app';
import { createWebhookQueue } from '../../shared/queue';
import { createRedis, RedisClient } from '../../shared/redis';
import { createServiceKey, TestServiceKey } from '../api/support/operations';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { RecordingServer, startRecordingServer } from '../support/recording-server';
import { Producer, createProducer, silentLogger, startWorker } from '../worker/support/harness';
import { waitFor } from '../support/wait-for';

/**
 * Redeliver and recover (docs/design.md §11.1) when Redis refuses the jobs after the rows were made
 * pending: the api behind `refusing` reaches Redis as a user that may not run scripts, which
 * every BullMQ write is, so its connection is ready and each job add fails.
 */
describe('a redelivery or a recovery whose jobs Redis refuses', () => {
  let env: TestEnvironment;
  let producer: Producer;
  let receiver: RecordingServer;
  let worker: { close(): Promise<void> };
  let working: FastifyInstance;
  let refusing: FastifyInstance;
  let refusingConnection: RedisClient;
  let operator: TestServiceKey;
  const aclUser = `pwt-no-scripts-${randomBytes(4).toString('hex')}`;

  beforeAll(async () => {
    env = await createTestEnvironment({ WEBHOOK_RETRY_SCHEDULE: '0.05', WEBHOOK_BREAKER_FAILURES: '1000' }, 'api');
    producer = createProducer(env.config);
    await producer.queue.waitUntilReady();
    operator = await createServiceKey(producer.db, ['*']);
    receiver = await startRecordingServer();
    worker = startWorker(env.config, producer.db);
    working = buildApp({ ...env.config, apiLayout: 'a' }, { database: producer.db, queue: producer.queue });
    await working.listen({ host: '127.0.0.1', port: 0 });
    const password = randomBytes(12).toString('hex');
    await producer.connection.call('ACL', 'SETUSER', aclUser, 'on', `>${password}`, '~*', '&*', '+@all', '-@scripting');
    const url = new URL(env.redisUrl);
    url.username = aclUser;
    url.password = password;
    refusingConnection = createRedis({ ...env.config, redisUrl: url.toString() }, 'client');
    refusingConnection.on('error', () => undefined);
    refusing = buildApp({ ...env.config, apiLayout: 'a' }, { queue: createWebhookQueue(env.config, refusingConnection, silentLogger) });
    await refusing.listen({ host: '127.0.0.1', port: 0 });
    await waitFor(() => refusingConnection.status === 'ready', 5_000, 'the refusing connection');
  });

  afterAll(async () => {
    await refusing.close();
    refusingConnection.disconnect();
    await producer.connection.call('ACL', 'DELUSER', aclUser);
    await working.close();
    await worker.close();
    await producer.queue.obliterate({ force: true });
    await producer.close();
    await receiver.close();
    await env.cleanup();
  });

  async function post(app: FastifyInstance, path: string, body?: unknown): Promise<{ statusCode: number; json(): any }> {
    const { port } = app.server.address() as AddressInfo;
    const response = await fetch(`http://127.0.0.1:${port}${path}`, {
      method: 'POST',
      headers: { ...operator.headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return { statusCode: response.status, json: () => JSON.parse(text) };
  }

  const byId = (a: { id: string }, b: { id: string }) => (a.id < b.id ? -1 : 1);
  /** The rows as the worker and the relay read them. */
  const rows = async (ids: string[]) =>
    (
      await producer.db.sequelize.query<{ id: string; status: string; one_shot: boolean }>('SELECT id, status, one_shot FROM webhook_deliveries WHERE id = ANY($1::text[])', {
        bind: [ids],
        type: QueryTypes.SELECT,
      })
    ).sort(byId);
  const settled = (ids: string[], status: string) =>
    waitFor(async () => (await rows(ids)).every((row) => row.status === status && !row.one_shot), 10_000, `deliveries ${status}`);

  it('when a redelivery and a recovery are asked at the same moment, then both answer 503 and every delivery keeps its status; asked again once Redis takes the jobs, each gets exactly one attempt', async () => {
    const endpoint = (await post(working, '/api/v1/endpoints', { url: `${receiver.url}/outage`, events: ['post.created'] })).json() as { id: number };
    const { id: succeeded } = (await post(working, '/api/v1/webhooks', { url: `${receiver.url}/fine`, event: 'a.b', payload: { n: 1 }, secret: 's' })).json();
    await settled([succeeded], 'succeeded');
    receiver.setReply({ status: 503 });
    const since = new Date(Date.now() - 60_000).toISOString();
    const failed: string[] = [];
    for (let n = 0; n < 2; n += 1) failed.push(...(await post(working, '/api/v1/events', { event: 'post.created', payload: { n } })).json().ids);
    await settled(failed, 'failed');
    receiver.setReply({});
    receiver.reset();

    const [redelivered, recovered] = await Promise.all([
      post(refusing, `/api/v1/webhooks/${succeeded}/redeliver`),
      post(refusing, `/api/v1/endpoints/${endpoint.id}/recover`, { since }),
    ]);

    expect([redelivered.statusCode, recovered.statusCode]).toEqual([503, 503]);
    expect(await rows([succeeded, ...failed])).toEqual(
      [
        { id: succeeded, status: 'succeeded', one_shot: false },
        ...failed.map((id) => ({ id, status: 'failed', one_shot: false })),
      ].sort(byId),
    );
    const [again, recoveredAgain] = await Promise.all([
      post(working, `/api/v1/webhooks/${succeeded}/redeliver`),
      post(working, `/api/v1/endpoints/${endpoint.id}/recover`, { since }),
    ]);
    expect([again.statusCode, recoveredAgain.statusCode, recoveredAgain.json()]).toEqual([202, 202, { count: 2 }]);
    const requests = await receiver.waitForRequests(3);
    expect(requests.map((request) => request.headers['webhook-id']).sort()).toEqual([succeeded, ...failed].sort());
    await settled([succeeded, ...failed], 'succeeded');
    expect(receiver.requests).toHaveLength(3);
  });
});
