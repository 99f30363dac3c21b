import { createHash, randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { deleteKeysByPrefix } from '../../shared/redis';
import { createMigratedDatabase, startPrimaryWithStandby, type PrimaryWithStandby } from '../support/own-postgres';
import { freePort, startService, type ServiceProcess } from '../support/processes';
import { startRecordingServer, type RecordingServer } from '../support/recording-server';
import { testServices } from '../support/services';

/**
 * docs/design.md §13.3: both api layouts and a worker run as processes and reach
 * PostgreSQL through one address (a TCP proxy standing in for a DNS name or a VIP). The
 * address first reaches the standby while it is still read-only, then the primary stops, the
 * standby is promoted and the address moves to it.
 */
const TOKEN = 'failover-writer-token';
const USER_ID = 1;
const SECRET = 'whsec_' + Buffer.from('failover-sink-secret-0123456789abcdef').toString('base64');
/** docs/design.md §15.1: the address reaches the read-only standby this long before the promotion. */
const READ_ONLY_WINDOW_MS = 5_000;
/** docs/design.md §15.1: deliveries resume within 10 s of the later of the promotion and the move. */
const RESUME_PROMISE_MS = 10_000;

type Layout = 'a' | 'b';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('PostgreSQL failover under the services (docs/design.md §13.3)', () => {
  let cluster: PrimaryWithStandby;
  let sink: RecordingServer;
  let redisPrefix: string;
  const ports = { a: 0, b: 0, worker: 0 };
  const services: ServiceProcess[] = [];

  beforeAll(async () => {
    cluster = await startPrimaryWithStandby({ synchronous: true });
    const direct = await createMigratedDatabase(cluster.primary, 'failover');
    sink = await startRecordingServer();
    const db = new Client({ connectionString: direct });
    await db.connect();
    await db.query(`INSERT INTO users (user_id, user_name, user_email, api_token_hash) VALUES ($1, 'writer', 'writer@example.com', $2)`, [
      USER_ID,
      createHash('sha256').update(TOKEN).digest('hex'),
    ]);
    await db.query(`INSERT INTO webhook_endpoints (url, secret, events) VALUES ($1, $2, '{}')`, [`${sink.url}/hooks`, SECRET]);
    await db.end();

    redisPrefix = `failover${randomBytes(4).toString('hex')}`;
    for (const key of Object.keys(ports) as (keyof typeof ports)[]) ports[key] = await freePort();
    const env = {
      NODE_ENV: 'test',
      LOG_LEVEL: 'warn',
      HOST: '127.0.0.1',
      DATABASE_URL: cluster.url('failover'),
      REDIS_URL: testServices().redisUrl,
      REDIS_PREFIX: redisPrefix,
      WEBHOOK_PRIVATE_ALLOWLIST: '127.0.0.1',
      WEBHOOK_RETRY_SCHEDULE: Array(14).fill('1').join(','),
      // The sink fails on purpose until the move: its circuit must not open meanwhile.
      WEBHOOK_BREAKER_FAILURES: '1000',
      RATE_LIMIT_PER_MIN: '0',
    };
    services.push(
      await startService('api-a', 'dist/services/api/src/server.js', { ...env, API_LAYOUT: 'a', PORT: String(ports.a) }, ports.a),
      await startService('api-b', 'dist/services/api/src/server.js', { ...env, API_LAYOUT: 'b', PORT: String(ports.b) }, ports.b),
      await startService('worker', 'dist/services/webhook-worker/src/main.js', { ...env, WORKER_METRICS_PORT: String(ports.worker) }, ports.worker),
    );
  }, 120_000);

  afterAll(async () => {
    await Promise.all(services.map((service) => service.stop('SIGKILL')));
    await sink?.close();
    await cluster?.destroy();
    if (redisPrefix) await deleteKeysByPrefix({ redisUrl: testServices().redisUrl }, redisPrefix);
  });

  const headers = { authorization: `Bearer ${TOKEN}`, user_id: String(USER_ID) };

  /** Creates a post through `layout`; the status, the body and, when acknowledged, the post's title. */
  async function create(layout: Layout, title: string): Promise<{ status: number; retryAfter: string | null; body: unknown; acknowledged: boolean }> {
    const response = await fetch(`http://127.0.0.1:${ports[layout]}/api/v1/posts${layout === 'a' ? '/create' : ''}`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify(layout === 'a' ? { title, body: 'during a failover', userId: USER_ID } : { title, content: 'during a failover' }),
      signal: AbortSignal.timeout(15_000),
    });
    const body = (await response.json()) as { status?: number };
    const acknowledged = response.status === 200 && body.status === (layout === 'a' ? 200 : 2001);
    return { status: response.status, retryAfter: response.headers.get('retry-after'), body, acknowledged };
  }

  const read = async (layout: Layout, path: string): Promise<number> =>
    (await fetch(`http://127.0.0.1:${ports[layout]}/api/v1${path}`, { headers, signal: AbortSignal.timeout(15_000) })).status;

  /** The sink answers 503 to what it receives before this time, 200 after. */
  let healthySince = Infinity;

  /** Titles of the posts whose post.created delivery the sink answered 200, with the time of the first. */
  function firstSuccesses(): Map<string, number> {
    const first = new Map<string, number>();
    for (const request of sink.requests) {
      if (request.receivedAt < healthySince) continue;
      const { _data: data } = JSON.parse(request.body.toString()) as { _data: { title?: string } };
      if (data.title && !first.has(data.title)) first.set(data.title, request.receivedAt);
    }
    return first;
  }

  it('when the address reaches the read-only standby and then the promoted one, then writes answer 503 (never 500) until the move, then succeed, the queued deliveries resume within 10 s, nothing acknowledged is lost and every process lives', async () => {
    sink.setReply((request) => ({ status: request.receivedAt < healthySince ? 503 : 200 }));

    // Deliveries queued and failing (the sink answers 503) when the fault begins.
    const acknowledged: string[] = [];
    for (const [index, layout] of (['a', 'b', 'a', 'b'] as const).entries()) {
      const created = await create(layout, `before-${index}`);
      expect(created.acknowledged).toBe(true);
      acknowledged.push(`before-${index}`);
    }
    await sink.waitForRequests(4, 10_000);

    cluster.address.retarget(cluster.standby.port);
    const windowEnds = Date.now() + READ_ONLY_WINDOW_MS;
    const refused: { layout: Layout; status: number; retryAfter: string | null; body: unknown }[] = [];
    const readStatuses = new Set<number>();
    for (let n = 0; Date.now() < windowEnds; n += 1) {
      const layout: Layout = n % 2 === 0 ? 'a' : 'b';
      const created = await create(layout, `window-${n}`);
      if (created.acknowledged) acknowledged.push(`window-${n}`);
      else refused.push({ layout, status: created.status, retryAfter: created.retryAfter, body: created.body });
      readStatuses.add(await read(layout, '/posts'));
      readStatuses.add(await read(layout, '/webhooks'));
      await sleep(200);
    }
    // Nothing could commit on a standby; each create was refused as an outage in its layout's shape.
    expect(acknowledged.filter((title) => title.startsWith('window-'))).toEqual([]);
    expect(refused.length).toBeGreaterThan(5);
    for (const answer of refused) {
      expect(answer).toEqual({
        layout: answer.layout,
        status: 503,
        retryAfter: '5',
        body: answer.layout === 'a' ? { status: 503, message: 'Service temporarily unavailable.' } : { message: 'Service temporarily unavailable.' },
      });
    }
    expect([...readStatuses].filter((status) => status !== 200 && status !== 503)).toEqual([]);

    await cluster.stopPrimary();
    await cluster.promote();
    cluster.address.retarget(cluster.standby.port);
    const movedAt = Date.now();
    healthySince = movedAt;

    // Writes succeed again, on the promoted standby.
    let after: Awaited<ReturnType<typeof create>> | undefined;
    for (let n = 0; !after?.acknowledged && Date.now() - movedAt < RESUME_PROMISE_MS; n += 1) {
      after = await create(n % 2 === 0 ? 'a' : 'b', `after-${n}`);
      expect([200, 503]).toContain(after.status);
      if (after.acknowledged) acknowledged.push(`after-${n}`);
      else await sleep(200);
    }
    expect(after?.acknowledged).toBe(true);

    // Every acknowledged post's event arrives; those queued before the fault within the promise.
    const deadline = Date.now() + 30_000;
    while (acknowledged.some((title) => !firstSuccesses().has(title)) && Date.now() < deadline) await sleep(100);
    const arrivals = firstSuccesses();
    expect(acknowledged.filter((title) => !arrivals.has(title))).toEqual([]);
    const queuedBefore = acknowledged.filter((title) => title.startsWith('before-')).map((title) => arrivals.get(title)!);
    expect(Math.max(...queuedBefore) - movedAt).toBeLessThan(RESUME_PROMISE_MS);

    // Nothing half-written: exactly the acknowledged posts exist on the new primary, each with its delivery.
    const db = new Client({ connectionString: cluster.standby.url('failover') });
    await db.connect();
    try {
      const { rows } = await db.query<{ title: string; deliveries: number }>(
        `SELECT p.post_title AS title,
                (SELECT count(*) FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id
                  WHERE d.event = 'post.created' AND e.body LIKE '%"title":"' || p.post_title || '"%')::int AS deliveries
           FROM posts p ORDER BY p.post_title`,
      );
      expect(rows).toEqual([...acknowledged].sort().map((title) => ({ title, deliveries: 1 })));
    } finally {
      await db.end();
    }
    expect(services.filter((service) => service.child.exitCode !== null || service.child.signalCode !== null).map((service) => service.output())).toEqual([]);
  });
});
