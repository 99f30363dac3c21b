import type { FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Config } from '../../../../shared/config';
import { createDatabase, type Database } from '../../../../shared/db';
import { createReadReplica } from '../../../../shared/db/read-replica';
import type { Metrics } from '../../../../shared/metrics';
import { rateLimitKey } from './rate-limit';

/**
 * Where the operations API's lists, searches and stats read (docs/design.md §13.3): with
 * DATABASE_REPLICA_URL the replica, unless the request's principal wrote within
 * REPLICA_MAX_LAG_S (it then reads the primary, so it sees what it just wrote) or the replica
 * is away, lagging or failing (the primary answers; `db_replica_skipped_total{reason}`
 * counts those). Without a replica, the primary. Single-object reads, reads that validate a
 * write, and writes never come here: they use the primary.
 */
export interface ListReader {
  /**
   * Runs `work` on the database chosen for the request's principal.
   *
   * @param work - reads only: it may run twice (the replica failing, then the primary)
   * @throws what `work` throws on the primary
   */
  read<T>(request: FastifyRequest, work: (db: Database) => Promise<T>): Promise<T>;
}

declare module 'fastify' {
  interface FastifyInstance {
    listReader: ListReader;
  }
}

/** The replica's pool: lists and stats only, so a few connections. */
const REPLICA_POOL_MAX = 4;
/** A replica host that vanished must not hold a list for the primary's 10 s connect bound, ms. */
const REPLICA_CONNECT_TIMEOUT_MS = 2_000;
const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

export interface ListReaderOptions {
  config: Config;
  primary: Database;
  metrics: Metrics;
}

/**
 * Decorates the instance with `listReader` (docs/design.md §13.3). With a replica it owns the replica's
 * pool (closed with the app) and notes each principal's writes in Redis (key
 * `<REDIS_PREFIX>:wrote:<principal>`, expiring after REPLICA_MAX_LAG_S, at least 1 s) before
 * the answer leaves, so every api process sends that principal's next lists to the primary.
 * Redis away: writes are not noted and lists read the primary. Needs the `redis` plugin.
 */
export const listReaderPlugin = fp<ListReaderOptions>(
  async (app, { config, primary, metrics }) => {
    if (!config.databaseReplicaUrl) {
      app.decorate('listReader', { read: (_request, work) => work(primary) } satisfies ListReader);
      return;
    }
    const replicaDb = createDatabase(config.databaseReplicaUrl, {
      poolMax: REPLICA_POOL_MAX,
      acceptStandby: true,
      connectTimeoutMs: REPLICA_CONNECT_TIMEOUT_MS,
    });
    app.addHook('onClose', () => replicaDb.close());
    const replica = createReadReplica(primary, replicaDb, {
      maxLagS: config.replicaMaxLagS,
      onSkip(reason, error) {
        metrics.dbReplicaSkipped.inc({ reason });
        app.log.debug({ reason, err: error }, 'read replica skipped: the primary answers');
      },
    });
    const noteMs = Math.max(1_000, Math.round(config.replicaMaxLagS * 1_000));
    const keyOf = (request: FastifyRequest) => `${config.redisPrefix}:wrote:${rateLimitKey(request)}`;

    const wroteRecently = async (request: FastifyRequest): Promise<boolean> => {
      try {
        return (await app.redis.exists(keyOf(request))) === 1;
      } catch {
        return true;
      }
    };
    const noteWrite = async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
      // A refused request (4xx) changed nothing; a 5xx may have committed before failing.
      if (!request.principal || !WRITE_METHODS.has(request.method) || (reply.statusCode >= 400 && reply.statusCode < 500)) return;
      try {
        await app.redis.set(keyOf(request), '1', 'PX', noteMs);
      } catch (error) {
        request.log.debug({ err: error }, 'could not note a write for read-your-writes; lists read the primary while Redis is away');
      }
    };

    app.addHook('onSend', async (request, reply, payload) => {
      await noteWrite(request, reply);
      return payload;
    });
    app.decorate('listReader', {
      read: async (request, work) => ((await wroteRecently(request)) ? work(primary) : replica.read(work)),
    } satisfies ListReader);
  },
  { name: 'list-reader', dependencies: ['redis'] },
);
