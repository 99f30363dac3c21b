import { createRedis, RedisClient, RedisTarget } from '../redis';

/**
 * A credential that changed and must no longer be trusted from any cache (docs/design.md §4,
 * "Revocation"): a user whose token was rotated or revoked or who was deleted (which also
 * ends their portal sessions), a service key that was revoked, or a portal link that was
 * revoked, ending the session it opened (docs/design.md §11.6).
 */
export type CredentialChange = { kind: 'user'; userId: number } | { kind: 'service_key'; id: number } | { kind: 'portal_link'; id: number };

/** The Redis pub/sub channel of credential changes under REDIS_PREFIX: `<prefix>:credential-changes`. */
export function credentialChangesChannel(prefix: string): string {
  return `${prefix}:credential-changes`;
}

/**
 * Tells every api process that a credential changed, so each drops what it cached about it.
 * Call it after the change is committed to PostgreSQL (a process that reloads earlier would
 * cache the old state again). A process whose subscription is down caches nothing, so a lost
 * message never leaves a revoked credential working.
 *
 * @param redis - any connection not in subscriber mode
 * @param prefix - REDIS_PREFIX
 * @returns how many api processes received it
 * @throws the connection's error when Redis is unreachable
 */
export async function publishCredentialChange(redis: RedisClient, prefix: string, change: CredentialChange): Promise<number> {
  const message = change.kind === 'user' ? { kind: 'user', userId: change.userId } : { kind: change.kind, id: change.id };
  return redis.publish(credentialChangesChannel(prefix), JSON.stringify(message));
}

/**
 * Reads one message of the channel.
 *
 * @returns the change, or null for anything else (a message from a newer version, garbage)
 */
export function parseCredentialChange(message: string): CredentialChange | null {
  try {
    const value = JSON.parse(message) as { kind?: unknown; userId?: unknown; id?: unknown };
    if (value.kind === 'user' && Number.isInteger(value.userId)) return { kind: 'user', userId: value.userId as number };
    if (value.kind === 'service_key' && Number.isInteger(value.id)) return { kind: 'service_key', id: value.id as number };
    if (value.kind === 'portal_link' && Number.isInteger(value.id)) return { kind: 'portal_link', id: value.id as number };
  } catch {
    // Not JSON: not ours.
  }
  return null;
}

/**
 * {@link publishCredentialChange} over a connection of its own, opened and closed here: for
 * short-lived commands (the users and keys CLIs) that hold no Redis connection.
 *
 * @param target - where Redis is (REDIS_URL or REDIS_CLUSTER_NODES; usually the whole Config)
 * @throws the connection's error when Redis is unreachable (within about 2 s)
 */
export async function announceCredentialChange(target: RedisTarget, prefix: string, change: CredentialChange): Promise<number> {
  // One try, no reconnects: a command line must not hang on a Redis that is away.
  const redis = createRedis(target, 'client', { lazyConnect: true, enableOfflineQueue: true, retryStrategy: () => null });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    return await publishCredentialChange(redis, prefix, change);
  } finally {
    await redis.quit().catch(() => redis.disconnect());
  }
}
