/** How a pool handles one kind of connection. */
export interface PooledKind<C> {
  /** Nothing in flight on it: it may be destroyed without losing work. */
  idle(connection: C): boolean;
  destroy(connection: C): void;
}

/** Keyed connections kept for reuse across attempts (see {@link createConnectionPool}). */
export interface ConnectionPool<C> {
  /**
   * The connection of `owner` (an endpoint) with these credentials (`version`, a fingerprint)
   * over `route` (direct, or a proxy's), opened with `open` when there is none. Opening one
   * destroys the idle connections of `owner` under another version, which can serve no one now.
   */
  get(owner: string, version: string, route: string, open: () => C): C;
  /** Destroys every connection. */
  close(): void;
}

/** Idle connections kept at most by default; past this the least recently used idle ones go. */
const MAX_IDLE_CONNECTIONS = 256;

/**
 * The destinations' one pool of per-endpoint connections (mutual TLS agents today): least
 * recently used first out, never one in use (its work would die; it goes once idle, at a
 * later opening).
 */
export function createConnectionPool<C>(kind: PooledKind<C>, maxIdle = MAX_IDLE_CONNECTIONS): ConnectionPool<C> {
  const entries = new Map<string, { owner: string; version: string; connection: C }>();

  function sweep(owner: string, version: string): void {
    let excess = entries.size - maxIdle;
    for (const [name, entry] of entries) {
      if (!kind.idle(entry.connection)) continue;
      const superseded = entry.owner === owner && entry.version !== version;
      if (!superseded && excess <= 0) continue;
      kind.destroy(entry.connection);
      entries.delete(name);
      excess -= 1;
    }
  }

  return {
    get(owner, version, route, open) {
      const name = `${owner}\n${version}\n${route}`;
      const found = entries.get(name);
      if (found) {
        // Most recently used last: the sweep drops from the front.
        entries.delete(name);
        entries.set(name, found);
        return found.connection;
      }
      sweep(owner, version);
      const connection = open();
      entries.set(name, { owner, version, connection });
      return connection;
    },
    close() {
      for (const { connection } of entries.values()) kind.destroy(connection);
      entries.clear();
    },
  };
}
