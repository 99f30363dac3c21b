import { Cluster } from 'ioredis';
import { Client } from 'pg';
import { Webhook } from 'standardwebhooks';
import { createTestEnvironment, TestEnvironment } from '../support/environment';
import { freePort, ServiceProcess, startService } from '../support/processes';
import { RecordingServer, startRecordingServer } from '../support/recording-server';
import { RedisClusterProcess, startRedisCluster } from '../support/redis-cluster';
import { waitFor } from '../support/wait-for';

/**
 * docs/design.md §13.1: the measured promise of the partitioned queue. On a three-master
 * cluster this file starts itself, with 12 partitions and deliveries to 60 endpoints, every
 * master serves at least a tenth of the commands and none more than two thirds, and every
 * delivery arrives signed.
 */
const START_TIMEOUT_MS = 60_000;
const ENDPOINTS = 60;
const POSTS = 10;
const PARTITIONS = 12;

/** Commands a Redis server served since its last CONFIG RESETSTAT (INFO commandstats), less this test's own INFO and CONFIG. */
async function commandsServed(node: { info(section: string): Promise<string> }): Promise<number> {
  const stats = await node.info('commandstats');
  let calls = 0;
  for (const match of stats.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    if (match[1] !== 'info' && match[1] !== 'config') calls += Number(match[2]);
  }
  return calls;
}

describe('with WEBHOOK_QUEUE_PARTITIONS=12 on a three-master Redis Cluster', () => {
  const secret = 'whsec_' + Buffer.from('partitioned-cluster-secret-0123456').toString('base64');
  let cluster: RedisClusterProcess;
  let env: TestEnvironment;
  let db: Client;
  let peer: RecordingServer;
  let redis: Cluster;
  let apiPort: number;
  const services: ServiceProcess[] = [];

  beforeAll(async () => {
    [cluster, env, peer] = await Promise.all([startRedisCluster(3), createTestEnvironment(), startRecordingServer()]);
    redis = new Cluster(cluster.nodes);
    db = new Client({ connectionString: env.databaseUrl });
    await db.connect();
    for (let i = 1; i <= ENDPOINTS; i += 1) {
      await db.query(`INSERT INTO webhook_endpoints (url, secret, events) VALUES ($1, $2, '{post.created}')`, [`${peer.url}/hooks/${i}`, secret]);
    }
    apiPort = await freePort();
    const workerPort = await freePort();
    const shared = {
      NODE_ENV: 'test',
      LOG_LEVEL: 'warn',
      HOST: '127.0.0.1',
      DATABASE_URL: env.databaseUrl,
      REDIS_URL: 'redis://127.0.0.1:1',
      REDIS_CLUSTER_NODES: cluster.nodesVariable,
      // No braces: each partition brings its own hash tag.
      REDIS_PREFIX: env.redisPrefix,
      WEBHOOK_QUEUE_PARTITIONS: String(PARTITIONS),
      OUTBOX_RELAY_INTERVAL_MS: '200',
      WORKER_LOCK_DURATION_MS: '5000',
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
    redis?.disconnect();
    await peer?.close();
    await db?.end();
    await cluster?.stop();
    await env?.cleanup();
  });

  it('when posts fan out to 60 endpoints, then every delivery arrives signed and every master serves between a tenth and two thirds of the commands', async () => {
    const user = await db.query<{ user_id: number }>(
      `INSERT INTO users (user_name, user_email, api_token_hash)
       VALUES ('partition writer', 'partitions@example.com', encode(sha256('partition-writer-token'), 'hex')) RETURNING user_id`,
    );
    const headers = { authorization: 'Bearer partition-writer-token', user_id: String(user.rows[0].user_id) };
    const masters = redis.nodes('master');
    expect(masters).toHaveLength(3);
    await Promise.all(masters.map(async (node) => node.config('RESETSTAT')));

    const pids: number[] = [];
    for (let i = 0; i < POSTS; i += 1) {
      const created = await fetch(`http://127.0.0.1:${apiPort}/api/v1/posts/create`, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json' },
        body: JSON.stringify({ title: `partitioned ${i}`, body: 'twelve queues', userId: user.rows[0].user_id }),
      });
      expect(created.status).toBe(200);
      const pid = ((await created.json()) as { item: { postId: number } }).item.postId;
      pids.push(pid);
      // Layout A's read cache (a two-key script under its own tag) works alongside.
      expect((await fetch(`http://127.0.0.1:${apiPort}/api/v1/posts/${pid}`, { headers })).status).toBe(200);
    }

    const requests = await peer.waitForRequests(ENDPOINTS * POSTS, 120_000);
    const verifier = new Webhook(secret);
    const seen = new Set<string>();
    for (const request of requests) {
      const verified = verifier.verify(request.body.toString(), request.headers as Record<string, string>) as { _data: { pid: number } };
      expect(pids).toContain(verified._data.pid);
      seen.add(`${request.path} ${verified._data.pid}`);
    }
    expect(seen.size).toBe(ENDPOINTS * POSTS);
    await waitFor(
      async () => (await db.query(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE status = 'succeeded'`)).rows[0].n === ENDPOINTS * POSTS,
      30_000,
      'every delivery to be marked succeeded',
    );

    const served = await Promise.all(masters.map(async (node) => commandsServed(node)));
    const total = served.reduce((sum, calls) => sum + calls, 0);
    const shares = served.map((calls) => calls / total);
    for (const share of shares) {
      expect(share).toBeGreaterThanOrEqual(0.1);
      expect(share).toBeLessThanOrEqual(2 / 3);
    }

    // The partitions' queues live on more than one master.
    const holding = await Promise.all(masters.map(async (node) => (await node.keys(`${env.redisPrefix}:{webhooks-*}:meta`)).length));
    expect(holding.reduce((sum, count) => sum + count, 0)).toBe(PARTITIONS);
    expect(holding.filter((count) => count > 0).length).toBeGreaterThanOrEqual(2);
    // The worker's maintenance queue (the daily retention prune) has a hash tag of its own.
    expect(await redis.exists(`${env.redisPrefix}:{webhook-maintenance}:meta`)).toBe(1);
  }, 240_000);
});
