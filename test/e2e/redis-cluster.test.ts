import { Cluster } from 'ioredis';
import { Client } from 'pg';
import { Webhook } from 'standardwebhooks';
import { deleteKeysByPrefix } from '../../shared/redis';
import { createTestEnvironment, TestEnvironment } from '../support/environment';
import { freePort, ServiceProcess, startService } from '../support/processes';
import { RecordingServer, startRecordingServer } from '../support/recording-server';
import { RedisClusterProcess, startRedisCluster } from '../support/redis-cluster';
import { waitFor } from '../support/wait-for';

/**
 * docs/design.md §13.1: the dispatch path against a three-master Redis Cluster this file starts itself.
 * REDIS_URL points at a closed port, so any Redis client that ignored REDIS_CLUSTER_NODES
 * would leave the api or the worker unready, or the post event undelivered.
 */
// Generous: two processes start at once, on a machine that may be busy with other test files.
const START_TIMEOUT_MS = 60_000;

describe('with REDIS_CLUSTER_NODES, the system runs on a Redis Cluster', () => {
  const secret = 'whsec_' + Buffer.from('redis-cluster-endpoint-secret-0123').toString('base64');
  let cluster: RedisClusterProcess;
  let env: TestEnvironment;
  let db: Client;
  let peer: RecordingServer;
  let redis: Cluster;
  let prefix: string;
  let apiPort: number;
  const services: ServiceProcess[] = [];

  beforeAll(async () => {
    [cluster, env, peer] = await Promise.all([startRedisCluster(3), createTestEnvironment(), startRecordingServer()]);
    prefix = `{${env.redisPrefix}}`;
    redis = new Cluster(cluster.nodes);
    db = new Client({ connectionString: env.databaseUrl });
    await db.connect();
    await db.query(`INSERT INTO webhook_endpoints (url, secret, events) VALUES ($1, $2, '{post.created}')`, [`${peer.url}/hooks`, secret]);
    apiPort = await freePort();
    const workerPort = await freePort();
    const shared = {
      NODE_ENV: 'test',
      LOG_LEVEL: 'warn',
      HOST: '127.0.0.1',
      DATABASE_URL: env.databaseUrl,
      REDIS_URL: 'redis://127.0.0.1:1',
      REDIS_CLUSTER_NODES: cluster.nodesVariable,
      REDIS_PREFIX: prefix,
      OUTBOX_RELAY_INTERVAL_MS: '200',
      WORKER_LOCK_DURATION_MS: '2000',
      WORKER_SHUTDOWN_TIMEOUT_MS: '2000',
    };
    // Each is kept as soon as it is up, so afterAll stops it even when the other failed.
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

  it('when a post is created, then its post.created arrives signed at the endpoint and the delivery succeeds', async () => {
    const user = await db.query<{ user_id: number }>(
      `INSERT INTO users (user_name, user_email, api_token_hash)
       VALUES ('cluster writer', 'cluster@example.com', encode(sha256('cluster-writer-token'), 'hex')) RETURNING user_id`,
    );
    const headers = { authorization: 'Bearer cluster-writer-token', user_id: String(user.rows[0].user_id) };
    const created = await fetch(`http://127.0.0.1:${apiPort}/api/v1/posts/create`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ title: 'over the cluster', body: 'three masters', userId: user.rows[0].user_id }),
    });
    expect(created.status).toBe(200);
    const pid = ((await created.json()) as { item: { postId: number } }).item.postId;

    const [request] = await peer.waitForRequests(1, 30_000);
    const delivery = (await db.query(`SELECT id FROM webhook_deliveries WHERE event = 'post.created'`)).rows[0] as { id: string };
    expect(request.headers['webhook-id']).toBe(delivery.id);
    const verified = new Webhook(secret).verify(request.body.toString(), request.headers as Record<string, string>) as {
      _data: { pid: number };
    };
    expect(verified._data.pid).toBe(pid);
    await waitFor(
      async () => (await db.query('SELECT status FROM webhook_deliveries WHERE id = $1', [delivery.id])).rows[0].status === 'succeeded',
      15_000,
      'the delivery to be marked succeeded',
    );
    // The job lived in the cluster, under the hash-tagged prefix.
    expect(await redis.exists(`${prefix}:webhooks:meta`)).toBe(1);

    // Layout A's read cache (a two-key script) works in the cluster too.
    const read = await fetch(`http://127.0.0.1:${apiPort}/api/v1/posts/${pid}`, { headers });
    expect(read.status).toBe(200);
    await waitFor(async () => (await redis.exists(`${prefix}:posts:post:${pid}`)) === 1, 15_000, 'the post to be cached');

    // Every key the system wrote (queue, cache, limits, breakers...) is under the hash tag, so
    // multi-key commands never span slots.
    const keys = (await Promise.all(redis.nodes('master').map(async (node) => node.keys('*')))).flat();
    expect(keys.filter((key) => !key.startsWith(`${prefix}:`))).toEqual([]);
  }, 60_000);

  it('when keys spread over every master are deleted by prefix, then none is left', async () => {
    const spread = `${env.redisPrefix}-spread:`;
    await Promise.all(Array.from({ length: 60 }, (_, i) => redis.set(`${spread}${i}`, 'x')));
    const holding = async () =>
      (await Promise.all(redis.nodes('master').map(async (node) => (await node.scan('0', 'MATCH', `${spread}*`, 'COUNT', 1000))[1].length))).filter(
        (count) => count > 0,
      ).length;
    expect(await holding()).toBe(3);

    await deleteKeysByPrefix({ redisUrl: 'redis://127.0.0.1:1', redisClusterNodes: cluster.nodes }, spread);

    expect(await holding()).toBe(0);
  });
});
