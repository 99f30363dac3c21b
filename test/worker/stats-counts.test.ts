import { QueryTypes } from 'sequelize';
import { OPERATOR, deleteEndpoint, getEndpointStats, recoverEndpoint, redeliver, replayEndpoint } from '../../shared/operations';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { RecordingServer, startRecordingServer } from '../support/recording-server';
import { countsFromLog, countsKept, perHour } from '../support/stats-counts';
import { waitFor } from '../support/wait-for';
import { Producer, addEndpoint, buildPostData, createProducer, deliveryRows, recordEvent, resetAndClose, startWorker } from './support/harness';

/**
 * docs/design.md §14: the stats counts, kept as attempts are recorded, equal what the attempt log
 * says after every kind of change the log sees: successes, retries, exhaustion, a recovery, a
 * redelivery, a replay and an endpoint deleted with a retry pending. The real worker against
 * real HTTP peers on 127.0.0.1.
 */
describe('stats counts kept as attempts are recorded', () => {
  let env: TestEnvironment;
  let producer: Producer;
  let peers: Record<'ok' | 'flaky' | 'dead' | 'doomed' | 'late', RecordingServer>;
  let running: ReturnType<typeof startWorker> | undefined;

  beforeAll(async () => {
    // Three attempts; the first retry comes 2 s later (±20%): time to delete an endpoint with one
    // pending. A circuit that never opens: each delivery makes all its attempts.
    env = await createTestEnvironment({ WEBHOOK_RETRY_SCHEDULE: '2,0.2', WEBHOOK_BREAKER_FAILURES: '1000' }, 'worker');
    producer = createProducer(env.config);
    await producer.queue.waitUntilReady();
    const [ok, flaky, dead, doomed, late] = await Promise.all([
      startRecordingServer({ status: 200 }),
      startRecordingServer({ status: 200 }),
      startRecordingServer({ status: 500 }),
      startRecordingServer({ status: 503 }),
      startRecordingServer({ status: 200 }),
    ]);
    peers = { ok, flaky, dead, doomed, late };
  });

  afterAll(async () => {
    await running?.close();
    await resetAndClose(producer);
    await Promise.all(Object.values(peers).map((peer) => peer.close()));
    await env.cleanup();
  });

  const deps = () => ({ db: producer.db, queue: producer.queue });
  const deliveriesOf = async (endpointId: number) => (await deliveryRows(producer.db)).filter((row) => row.endpointId === endpointId);
  const settled = (endpointId: number, status: string, attempts: (n: number) => boolean = () => true) =>
    waitFor(async () => {
      const rows = await deliveriesOf(endpointId);
      return rows.length > 0 && rows.every((row) => row.status === status && attempts(row.attempts)) && rows;
    }, 15_000, `endpoint ${endpointId}'s deliveries ${status}`);

  it('when deliveries succeed, retry, give up, are redelivered, recovered and replayed, and an endpoint is deleted with retries pending, then the minute and hour counts equal the attempt log', async () => {
    const add = (peer: RecordingServer) => addEndpoint(producer.db, `${peer.url}/hooks`, { events: ['post.created'] });
    const [ok, flaky, dead, doomed] = [await add(peers.ok), await add(peers.flaky), await add(peers.dead), await add(peers.doomed)];
    peers.flaky.replyOnce({ status: 500 });
    peers.flaky.replyOnce({ status: 502 });
    running = startWorker(env.config, producer.db);
    for (let pid = 1; pid <= 3; pid += 1) await recordEvent(producer, 'post.created', buildPostData({ pid }));

    // Deleted while each of its deliveries waits for its first retry: retried turns failed.
    await settled(doomed.id, 'pending', (n) => n === 1);
    await deleteEndpoint(producer.db, doomed.id, OPERATOR);
    await settled(ok.id, 'succeeded');
    await settled(flaky.id, 'succeeded');
    const exhausted = await settled(dead.id, 'failed', (n) => n === 3);

    // A one-shot redelivery that fails again: its last attempt stays failed, the one before turns retried.
    await redeliver(deps(), exhausted[0].id, OPERATOR);
    await waitFor(async () => (await deliveriesOf(dead.id)).some((row) => row.attempts === 4 && row.status === 'failed'), 10_000, 'the redelivery made');
    // Recovered once the endpoint answers again: every failed last attempt turns retried.
    peers.dead.setReply({ status: 200 });
    await recoverEndpoint(deps(), dead.id, OPERATOR, new Date(Date.now() - 3_600_000));
    await settled(dead.id, 'succeeded');
    // A redelivery of a success, and a replay onto an endpoint made after the events.
    const [first] = await deliveriesOf(ok.id);
    await redeliver(deps(), first.id, OPERATOR);
    await waitFor(async () => (await deliveriesOf(ok.id)).some((row) => row.attempts === 2), 10_000, 'the success redelivered');
    const late = await add(peers.late);
    expect(await replayEndpoint(deps(), late.id, OPERATOR, new Date(Date.now() - 3_600_000), env.config.webhookRetentionDays)).toBe(3);
    await settled(late.id, 'succeeded');
    await settled(doomed.id, 'failed');

    const log = await countsFromLog(producer.db.sequelize);
    const total = (field: 'succeeded' | 'retried' | 'failed') => log.reduce((sum, row) => sum + row[field], 0);
    // 3 ok + 1 redelivered, 3 flaky after 2 failures, 3 dead recovered, 3 late; 3 doomed failed; 10 dead failed attempts retried.
    expect([total('succeeded'), total('retried'), total('failed')]).toEqual([13, 12, 3]);
    expect(await countsKept(producer.db.sequelize)).toEqual(log);
    expect(await countsKept(producer.db.sequelize, 60)).toEqual(perHour(log));

    // The reads answer the same, the last success and failure as the log's.
    const stats = await getEndpointStats(producer.db, dead.id, OPERATOR, async () => 'closed', '1h');
    const deadLog = log.filter((row) => row.endpoint_id === dead.id);
    const sum = (rows: { succeeded: number; retried: number; failed: number }[]) =>
      rows.reduce((all, row) => [all[0] + row.succeeded, all[1] + row.retried, all[2] + row.failed], [0, 0, 0]);
    expect(sum(stats.series ?? [])).toEqual(sum(deadLog));
    expect(stats.attempts_24h).toBe(13);
    const [last] = await producer.db.sequelize.query<{ success: Date; failure: Date }>(
      `SELECT max(a.attempted_at) FILTER (WHERE a.status_code BETWEEN 200 AND 299) AS success,
              max(a.attempted_at) FILTER (WHERE a.status_code NOT BETWEEN 200 AND 299) AS failure
         FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.endpoint_id = $1`,
      { bind: [dead.id], type: QueryTypes.SELECT },
    );
    expect([stats.last_success_at, stats.last_failure_at]).toEqual([last.success.toISOString(), last.failure.toISOString()]);
  });
});
