import type { FastifyBaseLogger } from 'fastify';
import { CredentialChange, credentialChangesChannel, parseCredentialChange } from '../../../../shared/auth/credential-changes';
import type { RedisClient } from '../../../../shared/redis';
import type { CredentialStore, PortalSessionCredential, ServiceKeyCredential, UserCredential } from './credential-store';

/** A credential store that remembers what it read while its invalidation channel is live. */
export interface CachedCredentialStore extends CredentialStore {
  /** True while the invalidation subscription is live, which is exactly when the cache serves. */
  readonly live: boolean;
  /**
   * Drops what this process cached about a change it made itself, at once rather than when
   * its own message comes back; other processes still need `publishCredentialChange`.
   */
  forget(change: CredentialChange): void;
  /** Stops the heartbeat and closes the subscriber connection. */
  close(): Promise<void>;
}

export interface CredentialCacheOptions {
  /** A connection of its own (it enters subscriber mode); closed by `close()`. */
  subscriber: RedisClient;
  /** REDIS_PREFIX: the channel is `<prefix>:credential-changes`. */
  prefix: string;
  log: FastifyBaseLogger;
  /** Entries kept per kind; the oldest goes first. Default 10 000. */
  maxEntries?: number;
  /** An entry's lifetime, ms: a bound on staleness should a change never be published. Default 60 000. */
  ttlMs?: number;
  /** How often the subscription is checked with PING, ms. Default 1 000. */
  heartbeatMs?: number;
}

interface Entry<T> {
  value: T;
  expiresAt: number;
}

/**
 * Caches verified users, service keys and portal sessions in this process's memory (docs/design.md
 * §4, "Revocation"; §11.6), so a request by a known credential costs no PostgreSQL read. Changes
 * published with `publishCredentialChange` (users CLI, keys CLI, the receiver deleting a user,
 * a revoked portal link) evict the entry in every process within the pub/sub latency; a
 * user's change also evicts their portal sessions.
 *
 * The cache only serves while its subscription is known to be live: on a closed connection,
 * an error or a failed heartbeat it empties and stays off (every call reads PostgreSQL) until
 * the channel is subscribed again, so no message lost meanwhile can leave a revoked
 * credential working. A read that overlapped an invalidation is not remembered. Unknown users
 * and keys are never cached (a later create must work at once).
 */
export function createCachedCredentialStore(inner: CredentialStore, options: CredentialCacheOptions): CachedCredentialStore {
  const { subscriber, log, maxEntries = 10_000, ttlMs = 60_000, heartbeatMs = 1_000 } = options;
  const channel = credentialChangesChannel(options.prefix);
  const users = new Map<number, Entry<UserCredential>>();
  const keys = new Map<string, Entry<ServiceKeyCredential>>();
  const keyHashes = new Map<number, string>();
  const sessions = new Map<string, Entry<PortalSessionCredential>>();
  // Bumped by every invalidation; a read that started under an older epoch is not remembered.
  let epoch = 0;
  let live = false;
  let closed = false;

  const forgetAll = () => {
    epoch += 1;
    users.clear();
    keys.clear();
    keyHashes.clear();
    sessions.clear();
  };
  const goDown = (why: string, err?: unknown) => {
    forgetAll();
    if (!live) return;
    live = false;
    log.warn({ err, channel }, `credential cache off: ${why}; every request reads PostgreSQL until it is back`);
  };
  const subscribe = async () => {
    try {
      await subscriber.subscribe(channel);
      if (live || closed) return;
      forgetAll();
      live = true;
      log.info({ channel }, 'credential cache on: invalidation channel subscribed');
    } catch (err) {
      goDown('cannot subscribe to the invalidation channel', err);
    }
  };
  // Few sessions are cached at once; a scan on each change keeps no second index to keep right.
  const forgetSessions = (ended: (session: PortalSessionCredential) => boolean) => {
    for (const [hash, entry] of sessions) if (ended(entry.value)) sessions.delete(hash);
  };
  const invalidate = (change: CredentialChange) => {
    epoch += 1;
    if (change.kind === 'user') {
      users.delete(change.userId);
      forgetSessions((session) => session.userId === change.userId);
      return;
    }
    if (change.kind === 'portal_link') {
      forgetSessions((session) => session.linkId === change.id);
      return;
    }
    const hash = keyHashes.get(change.id);
    if (hash !== undefined) keys.delete(hash);
    keyHashes.delete(change.id);
  };

  subscriber.on('message', (from: string, message: string) => {
    if (from !== channel) return;
    const change = parseCredentialChange(message);
    // Something we cannot read may still be a change: forget everything rather than guess.
    if (change) invalidate(change);
    else forgetAll();
  });
  subscriber.on('ready', () => void subscribe());
  subscriber.on('close', () => goDown('Redis connection closed'));
  subscriber.on('error', (err: Error) => goDown('Redis error', err));
  if (subscriber.status === 'ready') void subscribe();

  // A half-open connection shows no error: a PING that gets no answer turns the cache off.
  const heartbeat = setInterval(() => {
    if (closed || subscriber.status !== 'ready') return;
    if (!live) return void subscribe();
    subscriber.ping().catch((err: Error) => goDown('heartbeat unanswered', err));
  }, heartbeatMs);
  heartbeat.unref();

  function remember<K, T>(map: Map<K, Entry<T>>, key: K, value: T, startedAt: number): boolean {
    if (!live || epoch !== startedAt) return false;
    if (map.size >= maxEntries) map.delete(map.keys().next().value as K);
    map.set(key, { value, expiresAt: Date.now() + ttlMs });
    return true;
  }
  function recall<K, T>(map: Map<K, Entry<T>>, key: K): T | undefined {
    if (!live) return undefined;
    const entry = map.get(key);
    if (entry === undefined) return undefined;
    if (entry.expiresAt > Date.now()) return entry.value;
    map.delete(key);
    return undefined;
  }

  return {
    get live() {
      return live;
    },
    forget: invalidate,
    async findUser(userId) {
      const hit = recall(users, userId);
      if (hit) return hit;
      const startedAt = epoch;
      const user = await inner.findUser(userId);
      if (user) remember(users, userId, user, startedAt);
      return user;
    },
    async findServiceKey(keyHash) {
      const hit = recall(keys, keyHash);
      if (hit) return hit;
      const startedAt = epoch;
      const key = await inner.findServiceKey(keyHash);
      if (key && remember(keys, keyHash, key, startedAt)) keyHashes.set(key.id, keyHash);
      return key;
    },
    async findPortalSession(tokenHash) {
      const hit = recall(sessions, tokenHash);
      if (hit) return hit;
      const startedAt = epoch;
      const session = await inner.findPortalSession(tokenHash);
      if (session) remember(sessions, tokenHash, session, startedAt);
      return session;
    },
    findTokenOwner: (tokenHash) => inner.findTokenOwner(tokenHash),
    touchServiceKey: (id) => inner.touchServiceKey(id),
    async close() {
      closed = true;
      clearInterval(heartbeat);
      live = false;
      forgetAll();
      await subscriber.quit().catch(() => subscriber.disconnect());
    },
  };
}
