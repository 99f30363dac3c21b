import { BaseError, QueryTypes } from 'sequelize';
import { isDatabaseUnavailable } from './errors';
import type { Database } from './index';

/** Why a read the replica could have served went to the primary (metric `db_replica_skipped_total{reason}`). */
export type ReplicaSkipReason = 'unreachable' | 'lagging' | 'error';

export interface ReadReplicaOptions {
  /** REPLICA_MAX_LAG_S: a replica further behind than this is not read, seconds. */
  maxLagS: number;
  /** Told of every read the replica did not serve although asked to, with why and the error, if any. */
  onSkip(reason: ReplicaSkipReason, error?: unknown): void;
  /** How long one measure of the lag is trusted, ms; default 1000. */
  lagCacheMs?: number;
}

/** Reads that a streaming replica may serve, the primary answering whenever it cannot (docs/design.md §13.3). */
export interface ReadReplica {
  /**
   * Runs `work` on the replica when it is reachable and at most `maxLagS` behind, else on the
   * primary; when it fails there with a database error (a query cancelled by a recovery
   * conflict, a lost connection), runs it again on the primary. Errors that are not the
   * database's (a bad cursor, a missing endpoint) are thrown as they are.
   *
   * @param work - reads only: it may run twice
   * @throws what `work` throws on the primary
   */
  read<T>(work: (db: Database) => Promise<T>): Promise<T>;
}

/** A measure of the replica's lag: seconds, or why there is none. */
type Lag = { seconds: number } | { skip: 'unreachable' | 'error'; error: unknown };

// Where the primary's WAL ends; a replica that replayed up to it misses nothing.
const PRIMARY_POSITION_SQL = 'SELECT pg_current_wal_lsn()::text AS lsn';

// On the replica, given the primary's position now ($1) and at the measure before ($2, read
// $3 seconds ago): 0 when it replayed everything the primary had written (an idle primary
// writes nothing new, whatever the age of the last transaction). Else two bounds, the smaller
// wins: the previous position, when replayed, was current $3 s ago; and nothing committed
// after the last transaction replayed reached the replica (with none replayed since its start,
// unknown: too far behind). A receive position would not do: once replication breaks it stops
// moving, replay reaches it, and the replica looks current for ever. Not in recovery (promoted,
// or a primary named by mistake): nothing to wait for.
const LAG_SQL = `SELECT CASE
    WHEN NOT pg_is_in_recovery() OR pg_last_wal_replay_lsn() >= $1::pg_lsn THEN 0
    ELSE least(
      CASE WHEN pg_last_wal_replay_lsn() >= $2::pg_lsn THEN $3::float8 END,
      coalesce(greatest(0, extract(epoch FROM now() - pg_last_xact_replay_timestamp())), 'Infinity')
    )
  END::float8 AS lag`;

/** The primary's WAL position (`pg_lsn` text) and when it was asked, epoch ms. */
interface PrimaryPosition {
  lsn: string;
  at: number;
}

/**
 * Creates the {@link ReadReplica} choice between `primary` and `replica`. The lag is measured
 * at most once per `lagCacheMs` (concurrent reads share one measure): the primary's WAL
 * position, then how far the replica's replay is from it, so a read costs no extra round trip
 * most of the time. A primary that does not answer leaves the replica's last replayed
 * transaction as the only bound. A replica last found unreachable or
 * failing is measured again in the background: reads go to the primary meanwhile instead of
 * waiting for a connect that may time out.
 */
export function createReadReplica(primary: Database, replica: Database, options: ReadReplicaOptions): ReadReplica {
  const cacheMs = options.lagCacheMs ?? 1_000;
  let last: Lag | undefined;
  let measuredAt = 0;
  let pending: Promise<Lag> | undefined;
  let previous: PrimaryPosition | undefined;

  const primaryPosition = async (): Promise<PrimaryPosition | undefined> => {
    const at = Date.now();
    try {
      const row = await primary.sequelize.query<{ lsn: string }>(PRIMARY_POSITION_SQL, { type: QueryTypes.SELECT, plain: true });
      return row ? { lsn: row.lsn, at } : undefined;
    } catch {
      // The read itself goes to the replica or fails on the primary as any read would.
      return undefined;
    }
  };
  const measure = async (): Promise<Lag> => {
    const current = await primaryPosition();
    const before = previous;
    if (current) previous = current;
    try {
      const bind = [current?.lsn ?? null, before?.lsn ?? null, before ? (Date.now() - before.at) / 1000 : null];
      const row = await replica.sequelize.query<{ lag: number }>(LAG_SQL, { bind, type: QueryTypes.SELECT, plain: true });
      return { seconds: Number(row?.lag) };
    } catch (error) {
      return { skip: skipReason(error), error };
    }
  };
  const lag = (): Promise<Lag> | Lag => {
    if (Date.now() - measuredAt >= cacheMs && !pending) {
      measuredAt = Date.now();
      pending = measure().then((result) => {
        last = result;
        pending = undefined;
        return result;
      });
    }
    // The first measure, or a fresh one of a replica last found serving, is waited for.
    if (last && ('skip' in last || !pending)) return last;
    return pending as Promise<Lag>;
  };

  return {
    async read(work) {
      const current = await lag();
      if ('skip' in current) {
        options.onSkip(current.skip, current.error);
        return work(primary);
      }
      if (!(current.seconds <= options.maxLagS)) {
        options.onSkip('lagging');
        return work(primary);
      }
      try {
        return await work(replica);
      } catch (error) {
        if (!(error instanceof BaseError)) throw error;
        const reason = skipReason(error);
        options.onSkip(reason, error);
        // The next reads go to the primary until a measure finds the replica back.
        if (reason === 'unreachable') {
          last = { skip: reason, error };
          measuredAt = Date.now();
        }
        return work(primary);
      }
    },
  };
}

function skipReason(error: unknown): 'unreachable' | 'error' {
  return isDatabaseUnavailable(error) ? 'unreachable' : 'error';
}
