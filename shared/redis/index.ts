import Redis, { Cluster, ClusterOptions, RedisOptions, SentinelConnectionOptions, SentinelConnector } from 'ioredis';
import type { RedisClient } from './client';

export type { RedisClient } from './client';

/**
 * Where Redis is: the part of `Config` this module reads, so `createRedis(config, ...)` fits.
 * With `redisClusterNodes` non-empty, the nodes are the seeds of a Redis Cluster and
 * `redisUrl` only lends its credentials (user, password) and TLS (`rediss://`) to them.
 */
export interface RedisTarget {
  redisUrl: string;
  redisClusterNodes?: readonly { host: string; port: number }[];
  /**
   * Sentinels (docs/design.md §13.2): with this list non-empty, connections reach the primary
   * the Sentinels name `redisSentinelName` and follow its failovers; `redisUrl` lends its db,
   * credentials and TLS to the data nodes.
   */
  redisSentinels?: readonly { host: string; port: number }[];
  redisSentinelName?: string;
  redisSentinelPassword?: string;
  redisSentinelUsername?: string;
  redisSentinelTls?: boolean;
}

/**
 * How a connection behaves while Redis is away:
 * - `worker`: BullMQ Worker connections; commands wait for the reconnect forever
 *   (BullMQ requires `maxRetriesPerRequest: null`).
 * - `client`: producers, caches, rate limits, pub/sub and the like; commands fail fast so a
 *   request never hangs on Redis.
 */
export type RedisRole = 'worker' | 'client';

// Reconnect forever with a capped backoff (milliseconds): Redis restarts must heal by themselves.
const reconnectDelay = (times: number) => Math.min(times * 200, 2_000);

/**
 * A demoted primary answers writes with READONLY (a failover moved the primary, or an address
 * now reaches a replica): reconnect, so a Sentinel connection asks for the new primary, and
 * resend the command (ioredis's `2`). Every other error reaches the caller as it is.
 */
export const reconnectOnReadOnly = (error: Error): 2 | false => (error.message.startsWith('READONLY') ? 2 : false);

/**
 * THE way to open a Redis connection (every client of the system goes through here, so
 * REDIS_SENTINELS or REDIS_CLUSTER_NODES switches all of them): an ioredis `Redis` to
 * `target.redisUrl`, an ioredis `Redis` to the primary of `target.redisSentinels` when that
 * list is non-empty, or an ioredis `Cluster` over `target.redisClusterNodes` when that list is
 * non-empty. A connection that meets READONLY reconnects ({@link reconnectOnReadOnly}). Keys that one
 * command or script touches together must share a hash tag in a cluster; REDIS_PREFIX is one
 * (`{pw}`, validated by shared/config), so keys under `<prefix>:` always do.
 *
 * @param target - usually the whole `Config`
 * @param role - see {@link RedisRole}
 * @param extra - further ioredis options, applied last; in a cluster `lazyConnect`,
 *   `enableOfflineQueue` and `retryStrategy` apply to the cluster, the rest to each node
 * @returns a connection that connects at once (unless `extra.lazyConnect`); the caller closes it
 */
export function createRedis(target: RedisTarget, role: RedisRole, extra: RedisOptions = {}): RedisClient {
  const base: RedisOptions =
    role === 'worker'
      ? { maxRetriesPerRequest: null, enableReadyCheck: true }
      : { maxRetriesPerRequest: 1, enableOfflineQueue: false, connectTimeout: 2_000 };
  const sentinels = target.redisSentinels ?? [];
  if (sentinels.length > 0) return new Redis(sentinelOptions(target, { ...base, retryStrategy: reconnectDelay, lazyConnect: false, ...extra }));
  const nodes = target.redisClusterNodes ?? [];
  if (nodes.length === 0) {
    return new Redis(target.redisUrl, { ...base, retryStrategy: reconnectDelay, reconnectOnError: reconnectOnReadOnly, lazyConnect: false, ...extra });
  }
  const { lazyConnect, enableOfflineQueue, retryStrategy, ...nodeExtra } = { ...base, ...extra };
  const options: ClusterOptions = {
    lazyConnect: lazyConnect ?? false,
    enableOfflineQueue: enableOfflineQueue ?? true,
    enableReadyCheck: true,
    clusterRetryStrategy: retryStrategy === undefined ? reconnectDelay : retryStrategy,
    redisOptions: { ...credentialsOf(target.redisUrl), ...nodeExtra },
  };
  return new Cluster(
    nodes.map(({ host, port }) => ({ host, port })),
    options,
  );
}

/**
 * The primary a Sentinel connection uses now, `host:port` as the Sentinels announce it
 * (docs/design.md §13.2: `/ready` and `/metrics` say which); undefined for a connection without
 * Sentinels or while it is not connected.
 */
export function redisPrimaryOf(client: RedisClient): string | undefined {
  if (isCluster(client) || (client.options.sentinels ?? []).length === 0 || client.status !== 'ready') return undefined;
  const socket = (client as unknown as { stream?: { remoteAddress?: string; remotePort?: number } }).stream;
  if (!socket?.remoteAddress) return undefined;
  return `${socket.remoteAddress}:${socket.remotePort}`;
}

/** True when `client` is a Redis Cluster connection. */
export function isCluster(client: RedisClient): client is Cluster {
  return (client as Cluster).isCluster === true;
}

/** User, password and TLS of a redis:// or rediss:// URL, for the nodes of a cluster or behind Sentinels. */
function credentialsOf(url: string): RedisOptions {
  const parsed = new URL(url);
  const options: RedisOptions = {};
  if (parsed.username) options.username = decodeURIComponent(parsed.username);
  if (parsed.password) options.password = decodeURIComponent(parsed.password);
  if (parsed.protocol === 'rediss:') options.tls = {};
  return options;
}

/**
 * ioredis's Sentinel connector, except that a connection's watch on `+switch-master` lives only
 * as long as its socket. ioredis keeps the watch after the socket closed, which costs twice:
 * - when the switch is announced while the reconnect loop is asking a Sentinel where the
 *   primary is, the stale watch ends that attempt and ioredis gives the connection up for good
 *   (status `end`, every command "Connection is closed."; reported upstream as
 *   redis/ioredis#1683);
 * - QUIT leaves the watch's connections to every Sentinel open, reconnecting, for the life of
 *   the process (redis/ioredis#1362).
 * A reconnect asks the Sentinels anyway, and starts a new watch once its socket is up.
 */
class SentinelReconnector extends SentinelConnector {
  /** @param options - the connection's own options, as ioredis passes them to a `Connector` */
  constructor(options: unknown) {
    super(options as SentinelConnectionOptions);
  }

  override async connect(...args: Parameters<SentinelConnector['connect']>): ReturnType<SentinelConnector['connect']> {
    const stream = await super.connect(...args);
    stream.once('close', () => {
      // The watch started on this socket's `connect`; the next socket's starts after this close.
      const own = this as unknown as { failoverDetector: { cleanup(): void } | null };
      own.failoverDetector?.cleanup();
      own.failoverDetector = null;
    });
    return stream;
  }
}

/**
 * ioredis options for the primary the Sentinels name. `failoverDetector` subscribes to each
 * Sentinel's `+switch-master`, so a failover moves the connection at once instead of when the
 * old primary's socket errors ({@link SentinelReconnector} keeps that from ending a reconnect);
 * READONLY from a demoted primary reconnects ({@link reconnectOnReadOnly}); data-node TLS
 * (`rediss://`) needs `enableTLSForSentinelMode`.
 */
function sentinelOptions(target: RedisTarget, options: RedisOptions): RedisOptions {
  const url = new URL(target.redisUrl);
  const credentials = credentialsOf(target.redisUrl);
  const db = Number(url.pathname.replace(/^\//, '') || 0);
  return {
    ...credentials,
    db,
    sentinels: (target.redisSentinels ?? []).map(({ host, port }) => ({ host, port })),
    name: target.redisSentinelName,
    sentinelPassword: target.redisSentinelPassword,
    sentinelUsername: target.redisSentinelUsername,
    sentinelTLS: target.redisSentinelTls ? {} : undefined,
    enableTLSForSentinelMode: credentials.tls !== undefined,
    failoverDetector: true,
    Connector: SentinelReconnector,
    sentinelRetryStrategy: reconnectDelay,
    reconnectOnError: reconnectOnReadOnly,
    ...options,
  };
}

/**
 * Where Redis is, for messages: REDIS_URL's host, or the cluster's seeds. Never the password.
 */
export function describeRedisTarget(target: RedisTarget): string {
  const sentinels = target.redisSentinels ?? [];
  if (sentinels.length > 0) {
    return `the primary ${target.redisSentinelName} of the Redis Sentinels at ${sentinels.map(({ host, port }) => `${host}:${port}`).join(',')} (REDIS_SENTINELS)`;
  }
  const nodes = target.redisClusterNodes ?? [];
  if (nodes.length > 0) return `the Redis Cluster at ${nodes.map(({ host, port }) => `${host}:${port}`).join(',')} (REDIS_CLUSTER_NODES)`;
  return `${new URL(target.redisUrl).host} (REDIS_URL)`;
}

/**
 * A readiness probe: PING, and in a cluster a PING to every master, so /ready reports a
 * cluster with a lost master as down.
 *
 * @throws the connection's error when a node does not answer
 */
export async function pingRedis(client: RedisClient): Promise<void> {
  if (!isCluster(client)) {
    await client.ping();
    return;
  }
  const masters = client.nodes('master');
  if (client.status !== 'ready' || masters.length === 0) throw new Error(`Redis Cluster is not ready (${client.status})`);
  await Promise.all(masters.map((node) => node.ping()));
}

/**
 * Deletes every key that starts with `prefix` (SCAN + UNLINK, never KEYS, so Redis is not
 * blocked), on every master of a cluster, over a connection of its own that is closed before
 * this resolves. For tests, benchmarks and operators clearing one system's keys (REDIS_PREFIX).
 */
export async function deleteKeysByPrefix(target: RedisTarget, prefix: string): Promise<void> {
  // Commands wait for the connection (offline queue) instead of failing before it is up.
  const client = createRedis(target, 'client', { enableOfflineQueue: true, lazyConnect: true, retryStrategy: () => null });
  try {
    await client.connect();
    const nodes = isCluster(client) ? client.nodes('master') : [client];
    for (const node of nodes) {
      let cursor = '0';
      do {
        const [next, keys] = await node.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
        cursor = next;
        // One UNLINK per key: a cluster refuses several keys of different slots in one command.
        if (keys.length > 0) await keys.reduce((batch, key) => batch.unlink(key), node.pipeline()).exec();
      } while (cursor !== '0');
    }
  } finally {
    // QUIT waits for the server to close; disconnect() would leave a 2 s timer behind.
    await client.quit().catch(() => client.disconnect());
  }
}

/** A wait for a connection to become ready; see {@link whenReady}. */
export interface ReadyWait {
  /** True once the connection is ready; false after the bound or `cancel()`. Never rejects. */
  ready: Promise<boolean>;
  /** Ends the wait at once (false), so a closing process is not held for the rest of the bound. */
  cancel(): void;
}

/**
 * Waits up to `timeoutMs` for the connection's `ready` event; the connection keeps
 * reconnecting either way.
 */
export function whenReady(redis: RedisClient, timeoutMs: number): ReadyWait {
  if (redis.status === 'ready') return { ready: Promise.resolve(true), cancel: () => undefined };
  let finish: (ready: boolean) => void = () => undefined;
  const ready = new Promise<boolean>((resolve) => {
    const onReady = () => finish(true);
    const timer = setTimeout(() => finish(false), timeoutMs);
    finish = (value) => {
      clearTimeout(timer);
      redis.off('ready', onReady);
      resolve(value);
    };
    redis.once('ready', onReady);
  });
  return { ready, cancel: () => finish(false) };
}

/**
 * Closes a connection so that nothing of it outlives the returned promise: QUIT when ready
 * (the server closes the socket), else disconnect. A connection still connecting is first
 * let finish or fail: ending a socket mid-connect leaves it, with ioredis's connect timer,
 * holding the process open for up to the connect timeout.
 */
export async function closeRedis(connection: RedisClient): Promise<void> {
  if (connection.status === 'connecting' || connection.status === 'connect') {
    await new Promise<void>((resolve) => {
      const settled = () => {
        connection.off('ready', settled);
        connection.off('close', settled);
        resolve();
      };
      connection.once('ready', settled);
      connection.once('close', settled);
    });
  }
  if (connection.status === 'ready') await connection.quit().catch(() => connection.disconnect());
  else connection.disconnect();
}

export { createOutageLog, logRedisOutages } from './outage-log';
export type { OutageLog, OutageLogger } from './outage-log';
