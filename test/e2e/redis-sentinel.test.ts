import { Client } from 'pg';
import { Webhook } from 'standardwebhooks';
import { ConfigError, loadConfig } from '../../shared/config';
import { createRedis, closeRedis } from '../../shared/redis';
import { createTestEnvironment, TestEnvironment } from '../support/environment';
import { freePort, ServiceProcess, startService } from '../support/processes';
import { RecordingServer, startRecordingServer } from '../support/recording-server';
import { RedisSentinelSet, SENTINEL_PRIMARY_NAME, startRedisSentinels } from '../support/redis-sentinel';
import { waitFor } from '../support/wait-for';

/**
 * docs/design.md §13.2: with REDIS_SENTINELS every Redis client reaches the primary the
 * Sentinels name and follows its failovers. REDIS_URL points at a closed port, so a client
 * that ignored the Sentinels would leave a process unready or an event undelivered.
 */
const START_TIMEOUT_MS = 60_000;

describe('with REDIS_SENTINELS, the system follows the primary the Sentinels name', () => {
  const secret = 'whsec_' + Buffer.from('redis-sentinel-endpoint-secret-0123').toString('base64');
  let set: RedisSentinelSet;
  let env: TestEnvironment;
  let db: Client;
  let peer: RecordingServer;
  let apiPort: number;
  let workerPort: number;
  let headers: Record<string, string>;
  let userId: number;
  const services: ServiceProcess[] = [];

  beforeAll(async () => {
    [set, env, peer] = await Promise.all([startRedisSentinels(2), createTestEnvironment(), startRecordingServer()]);
    db = new Client({ connectionString: env.databaseUrl });
    await db.connect();
    await db.query(`INSERT INTO webhook_endpoints (url, secret, events) VALUES ($1, $2, '{post.created}')`, [`${peer.url}/hooks`, secret]);
    const user = await db.query<{ user_id: number }>(
      `INSERT INTO users (user_name, user_email, api_token_hash)
       VALUES ('sentinel writer', 'sentinel@example.com', encode(sha256('sentinel-writer-token'), 'hex')) RETURNING user_id`,
    );
    userId = user.rows[0].user_id;
    headers = { authorization: 'Bearer sentinel-writer-token', user_id: String(userId) };
    apiPort = await freePort();
    workerPort = await freePort();
    const shared = {
      NODE_ENV: 'test',
      LOG_LEVEL: 'warn',
      HOST: '127.0.0.1',
      DATABASE_URL: env.databaseUrl,
      REDIS_URL: 'redis://127.0.0.1:1',
      REDIS_SENTINELS: set.sentinelsVariable,
      REDIS_SENTINEL_NAME: SENTINEL_PRIMARY_NAME,
      REDIS_PREFIX: env.redisPrefix,
      OUTBOX_RELAY_INTERVAL_MS: '200',
      WORKER_LOCK_DURATION_MS: '2000',
      WORKER_SHUTDOWN_TIMEOUT_MS: '2000',
    };
    const start = async (name: string, script: string, extra: Record<string, string>, port: number) => {
      services.push(await startService(name, script, { ...shared, ...extra }, port, START_TIMEOUT_MS));
    };
    await Promise.all([
      start('api-a', 'dist/services/api/src/server.js', { API_LAYOUT: 'a', PORT: String(apiPort) }, apiPort),
      start('webhook-worker', 'dist/services/webhook-worker/src/main.js', { WORKER_METRICS_PORT: String(workerPort) }, workerPort),
    ]);
  }, 2 * START_TIMEOUT_MS);

  afterAll(async () => {
    await Promise.all(services.map((service) => service.stop('SIGKILL')));
    await peer?.close();
    await db?.end();
    await set?.stop();
    await env?.cleanup();
  });

  const ready = async (port: number) => (await (await fetch(`http://127.0.0.1:${port}/ready`)).json()) as { status: string; redis_primary?: string };

  /** Creates a post and resolves once its post.created arrived verified; every answer meanwhile is 200 or 503. */
  async function createdAndDelivered(title: string): Promise<void> {
    let status = 0;
    await waitFor(
      async () => {
        const created = await fetch(`http://127.0.0.1:${apiPort}/api/v1/posts/create`, {
          method: 'POST',
          headers: { ...headers, 'content-type': 'application/json' },
          body: JSON.stringify({ title, body: 'behind Sentinels', userId }),
        });
        status = created.status;
        expect([200, 503]).toContain(status);
        return status === 200;
      },
      15_000,
      `the create of ${title} to be accepted`,
    );
    await waitFor(
      async () =>
        peer.requests.find((request) => {
          const data = new Webhook(secret).verify(request.body.toString(), request.headers as Record<string, string>) as { _data: { title: string } };
          return data._data.title === title;
        }),
      10_000,
      `${title} to arrive`,
    );
  }

  it('when the services start, then /ready and /metrics name the primary, and a post event arrives', async () => {
    const primary = await set.primaryPort();
    expect((await ready(apiPort)).redis_primary).toBe(`127.0.0.1:${primary}`);
    expect((await ready(workerPort)).redis_primary).toBe(`127.0.0.1:${primary}`);
    const metrics = await (await fetch(`http://127.0.0.1:${workerPort}/metrics`)).text();
    expect(metrics).toContain(`redis_primary{address="127.0.0.1:${primary}"`);
    await createdAndDelivered('before any failover');
  }, 30_000);

  it('when the Sentinels fail over, and then the new primary is killed, then delivery resumes on each new primary within 10 s and no process dies', async () => {
    const promoted = await set.failover();
    await waitFor(async () => (await ready(apiPort)).redis_primary === `127.0.0.1:${promoted}`, 10_000, 'the api to use the promoted primary');
    await waitFor(async () => (await ready(workerPort)).redis_primary === `127.0.0.1:${promoted}`, 10_000, 'the worker to use the promoted primary');
    await createdAndDelivered('after a forced failover');

    await set.kill(promoted);
    let next = promoted;
    await waitFor(async () => {
      next = await set.primaryPort();
      return next !== promoted;
    }, 20_000, 'the Sentinels to promote another replica');
    await waitFor(async () => (await ready(workerPort)).redis_primary === `127.0.0.1:${next}`, 10_000, 'the worker to use the next primary');
    await createdAndDelivered('after the new primary was killed');
    for (const service of services) expect(service.child.exitCode).toBeNull();
  }, 90_000);

  it('when a connection reaches a demoted primary, then its write fails fast and it reconnects, and through the Sentinels the write reaches the primary', async () => {
    const primary = await set.primaryPort();
    const replica = set.dataPorts.find((port) => port !== primary) ?? 0;
    // A plain REDIS_URL to a replica: an address that a failover turned into one.
    const client = createRedis({ redisUrl: `redis://127.0.0.1:${replica}` }, 'client');
    let reconnects = 0;
    client.on('reconnecting', () => (reconnects += 1));
    try {
      await waitFor(async () => client.status === 'ready', 5_000, 'the connection');
      await expect(client.set(`${env.redisPrefix}:readonly-probe`, '1')).rejects.toThrow();
      await waitFor(async () => reconnects > 0, 5_000, 'the connection to reconnect after READONLY');
    } finally {
      await closeRedis(client);
    }
    const sentinel = createRedis({ redisUrl: 'redis://127.0.0.1:1', redisSentinels: set.sentinels, redisSentinelName: SENTINEL_PRIMARY_NAME }, 'client');
    try {
      await waitFor(async () => sentinel.status === 'ready', 5_000, 'the Sentinel connection');
      expect(await sentinel.set(`${env.redisPrefix}:sentinel-probe`, '1')).toBe('OK');
    } finally {
      await closeRedis(sentinel);
    }
  }, 30_000);
});

describe('the Sentinel settings', () => {
  it('when both REDIS_SENTINELS and REDIS_CLUSTER_NODES are set, or Sentinels without a name, then the start fails naming the variables', () => {
    expect(() => loadConfig({ REDIS_SENTINELS: '127.0.0.1:26379', REDIS_CLUSTER_NODES: '127.0.0.1:7000', REDIS_PREFIX: '{pw}' })).toThrow(
      /REDIS_SENTINELS and REDIS_CLUSTER_NODES/,
    );
    expect(() => loadConfig({ REDIS_SENTINELS: '127.0.0.1:26379' })).toThrow(ConfigError);
    expect(() => loadConfig({ REDIS_SENTINELS: '127.0.0.1:26379' })).toThrow(/REDIS_SENTINEL_NAME/);
    expect(() => loadConfig({ REDIS_SENTINELS: 'nohostport', REDIS_SENTINEL_NAME: 'p' })).toThrow(/REDIS_SENTINELS/);
  });

  it('when Sentinels are set, then REDIS_URL lends db and credentials and the Sentinel options are read', () => {
    const config = loadConfig({
      REDIS_SENTINELS: '10.0.0.1:26379, [::1]:26380',
      REDIS_SENTINEL_NAME: 'mymaster',
      REDIS_SENTINEL_PASSWORD: 'sentinel-pass',
      REDIS_SENTINEL_USERNAME: 'sentinel-user',
      REDIS_SENTINEL_TLS: 'true',
    });
    expect(config.redisSentinels).toEqual([
      { host: '10.0.0.1', port: 26379 },
      { host: '::1', port: 26380 },
    ]);
    expect(config).toMatchObject({ redisSentinelName: 'mymaster', redisSentinelPassword: 'sentinel-pass', redisSentinelUsername: 'sentinel-user', redisSentinelTls: true });
    const client = createRedis({ ...config, redisUrl: 'rediss://data-user:data-pass@ignored:6379/3' }, 'client', { lazyConnect: true });
    try {
      expect(client.options).toMatchObject({
        name: 'mymaster',
        db: 3,
        username: 'data-user',
        password: 'data-pass',
        sentinelUsername: 'sentinel-user',
        sentinelPassword: 'sentinel-pass',
        sentinelTLS: {},
        enableTLSForSentinelMode: true,
        failoverDetector: true,
      });
    } finally {
      client.disconnect();
    }
  });
});
