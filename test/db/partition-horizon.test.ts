import { QueryTypes } from 'sequelize';
import { createDatabase, Database } from '../../shared/db';
import { ensureDayPartitions } from '../../shared/db/partitions';
import { insertSingleDelivery } from '../../shared/deliveries/events';
import { processEnv } from '../support/environment';
import { idAt } from '../support/partitions';
import { freePort, ServiceProcess, startService } from '../support/processes';
import { startTcpProxy, TcpProxy } from '../support/tcp-proxy';
import { ApiHarness, createApiHarness } from '../api/support/api-harness';
import { createServiceKey } from '../api/support/operations';
import { waitFor } from '../support/wait-for';

const DAY_MS = 86_400_000;
/** MAINTENANCE_INTERVAL_MS of the processes here; docs/design.md §3.5 promises at most a minute by default. */
const INTERVAL_MS = 1_000;
/** What the promise allows on top of one interval: the check's own queries. */
const SLACK_MS = 2_000;

/** Every timer API but Date keeps running for real: the clock alone jumps. */
const REAL_TIMERS = [
  'hrtime',
  'nextTick',
  'performance',
  'queueMicrotask',
  'requestAnimationFrame',
  'cancelAnimationFrame',
  'requestIdleCallback',
  'cancelIdleCallback',
  'setImmediate',
  'clearImmediate',
  'setInterval',
  'clearInterval',
  'setTimeout',
  'clearTimeout',
] as const;

/** docs/design.md §3.5: the day partitions ahead do not depend on a start or on Redis. */
describe('the partition horizon', () => {
  let harness: ApiHarness;
  // Room for a blocking transaction, the statement it blocks and the test's own looks at once.
  let db: Database;

  beforeAll(async () => {
    harness = await createApiHarness();
    db = createDatabase(harness.env.databaseUrl, { poolMax: 8 });
  });

  afterAll(async () => {
    await db.close();
    await harness.close();
  });

  const sequelize = () => db.sequelize;
  const stamp = (day: Date) => day.toISOString().slice(0, 10).replace(/-/g, '');
  /** The partitions of the UTC day `days` after today (of the real clock), by name. */
  const partitionsAhead = async (days: number): Promise<string[]> => {
    const day = stamp(new Date(Date.now() + days * DAY_MS));
    const rows = await sequelize().query<{ name: string }>(
      `SELECT c.relname AS name FROM pg_class c WHERE c.relispartition AND c.relname IN ($1, $2, $3) ORDER BY c.relname`,
      { bind: [`webhook_attempts_p${day}`, `webhook_deliveries_p${day}`, `webhook_events_p${day}`], type: QueryTypes.SELECT },
    );
    return rows.map((row) => row.name);
  };
  const dropDayAhead = async (days: number) => {
    for (const name of await partitionsAhead(days)) await sequelize().query(`DROP TABLE ${name}`);
    expect(await partitionsAhead(days)).toEqual([]);
  };
  const comesBack = (days: number, what: string) =>
    waitFor(async () => (await partitionsAhead(days)).length === 3 || undefined, INTERVAL_MS + SLACK_MS, what);

  describe('with the services running as processes', () => {
    let proxy: TcpProxy;
    let api: ServiceProcess | undefined;
    let worker: ServiceProcess | undefined;

    beforeAll(async () => {
      const target = new URL(harness.env.databaseUrl);
      proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) });
    });

    afterAll(async () => {
      await api?.stop();
      await worker?.stop();
      await proxy.close();
    });

    const throughProxy = () => {
      const url = new URL(harness.env.databaseUrl);
      url.host = `127.0.0.1:${proxy.port}`;
      return url.toString();
    };

    it('When the furthest day ahead is dropped while an api runs, then the api makes it again within its check interval', async () => {
      const port = await freePort();
      const vars = processEnv(harness.env, {
        PORT: String(port),
        HOST: '127.0.0.1',
        LOG_LEVEL: 'warn',
        DATABASE_URL: throughProxy(),
        MAINTENANCE_INTERVAL_MS: String(INTERVAL_MS),
      });
      api = await startService('api', 'dist/services/api/src/server.js', vars, port);
      await comesBack(7, 'the start-up partitions');

      await dropDayAhead(7);

      await comesBack(7, 'the dropped day made again by the api');
    });

    it('When PostgreSQL is unreachable for several checks, then the api logs each, stays up, and makes the missing day once it is back', async () => {
      await dropDayAhead(7);
      await proxy.cut('refuse');
      const failures = () => (api?.output().match(/could not check the day partitions ahead/g) ?? []).length;
      await waitFor(async () => failures() >= 2 || undefined, 3 * INTERVAL_MS + SLACK_MS, 'two failed checks logged');
      expect(api?.child.exitCode).toBeNull();

      await proxy.restore();

      await waitFor(async () => (await partitionsAhead(7)).length === 3 || undefined, 2 * INTERVAL_MS + SLACK_MS, 'the day made after the outage');
      expect(api?.child.exitCode).toBeNull();
    });

    it('When the furthest day ahead is dropped while a worker runs, then the worker makes it again within its check interval', async () => {
      await api?.stop();
      api = undefined;
      const port = await freePort();
      const vars = processEnv(harness.env, { WORKER_METRICS_PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn', MAINTENANCE_INTERVAL_MS: String(INTERVAL_MS) });
      worker = await startService('worker', 'dist/services/webhook-worker/src/main.js', vars, port);
      await comesBack(7, 'the start-up partitions');

      await dropDayAhead(7);

      await comesBack(7, 'the dropped day made again by the worker');
    });
  });

  it('When eight days pass without a restart, then a webhook sent then finds its day partition', async () => {
    const api = await harness.start('a', { maintenanceIntervalMs: 200 });
    const operator = await createServiceKey(harness.db, ['*']);
    jest.useFakeTimers({ doNotFake: [...REAL_TIMERS], advanceTimers: true, now: Date.now() + 8 * DAY_MS });
    try {
      // The test's clock jumped too: "today" is eight days on. The api's ids carry its own clock's time.
      await waitFor(async () => (await partitionsAhead(0)).length === 3 || undefined, 10_000, 'the partitions of eight days on');

      const sent = await api.request({
        method: 'POST',
        url: '/api/v1/webhooks',
        headers: operator.headers,
        payload: { url: 'http://127.0.0.1:9/horizon', event: 'horizon.checked', payload: { days: 8 }, secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' },
      });

      expect(sent.statusCode).toBe(202);
      const { id } = sent.json() as { id: string };
      expect((await api.request({ url: `/api/v1/webhooks/${id}`, headers: operator.headers })).json()).toMatchObject({ id, status: 'pending' });
      const [row] = await sequelize().query<{ partition: string }>(`SELECT tableoid::regclass::text AS partition FROM webhook_deliveries WHERE id = $1`, {
        bind: [id],
        type: QueryTypes.SELECT,
      });
      expect(row.partition).toBe(`webhook_deliveries_p${stamp(new Date())}`);
    } finally {
      jest.useRealTimers();
      // Its checks would race the tests below for the days they drop.
      await api.app.close();
    }
  });

  it('When another transaction holds a table while a day is made, then the making gives up after its lock timeout and writes behind it go on', async () => {
    await dropDayAhead(7);
    const blocker = await sequelize().transaction();
    let making: Promise<unknown> | undefined;
    try {
      await sequelize().query('LOCK TABLE webhook_events IN ROW EXCLUSIVE MODE', { transaction: blocker });
      making = ensureDayPartitions(sequelize()).catch((error: unknown) => error);
      await waitFor(async () => {
        const [row] = await sequelize().query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%PARTITION OF%'`,
          { type: QueryTypes.SELECT },
        );
        return row.n > 0 || undefined;
      }, 10_000, 'the day creation waiting for its lock');

      // Queued behind the creation's exclusive lock, this write goes on once the creation gives up.
      const id = idAt('msg_', new Date());
      await insertSingleDelivery(sequelize(), {
        id,
        kind: 'send',
        event: 'post.created',
        body: '{"_data":{}}',
        endpointId: null,
        userId: null,
        url: 'http://127.0.0.1:9/x',
        method: 'POST',
        headers: {},
        secret: null,
        algo: 'sha256',
        signatureHeader: 'X-Signature',
        traceparent: null,
      });
      expect(await making).toMatchObject({ parent: { code: '55P03' } });
    } finally {
      await blocker.rollback();
    }
    expect(await ensureDayPartitions(sequelize())).toBe(3);
    expect(await partitionsAhead(7)).toHaveLength(3);
  });

  it('When three processes make the same missing day at once, then each succeeds and the day exists once', async () => {
    await dropDayAhead(7);

    await Promise.all([1, 2, 3].map(() => ensureDayPartitions(sequelize())));

    expect(await partitionsAhead(7)).toHaveLength(3);
  });
});
