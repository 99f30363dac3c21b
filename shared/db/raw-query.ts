import type { ClientBase, QueryConfig } from 'pg';
import { DatabaseError, Sequelize } from 'sequelize';

/**
 * One statement for {@link rawQuery}: SQL with `$1..$n` placeholders and their values. A
 * `name` makes it a prepared statement on each pooled connection (parsed and planned once
 * per connection, then only bound); give one only to a fixed SQL text, and one name per text.
 */
export interface RawStatement {
  text: string;
  values?: unknown[];
  name?: string;
}

/** A pooled connection lent by {@link withRawConnection}: run statements on it with `query`. */
export interface RawConnection {
  /** Runs one statement; rows as node-postgres parses them with Sequelize's type parsers. */
  query<R extends object>(statement: RawStatement): Promise<R[]>;
}

/**
 * Runs `work` on one connection borrowed from Sequelize's own pool (the primary's, should
 * replication ever be configured) and gives it back after,
 * skipping Sequelize's query pipeline (option cloning, bind rewriting, result formatting) for
 * hot paths. The process keeps one pool, one POOL_MAX and one connection set-up (time zone,
 * type parsers), so rows come back exactly as `sequelize.query(..., { raw: true })` gives them.
 *
 * Errors keep the shapes callers test with `isDatabaseUnavailable`: no connection (refused,
 * pool acquire timeout) is Sequelize's `ConnectionError`, as from `sequelize.query`; a failed
 * statement is a Sequelize `DatabaseError` whose `parent` is node-postgres' error (its
 * SQLSTATE in `parent.code`; none when the connection was lost mid-query). A connection that
 * failed so (lost, FATAL, read-only: shared/db/errors.ts `spoilsConnection`) is marked as it
 * fails (shared/db/connection-setup.ts), so giving it back closes it.
 *
 * No transaction is opened: one statement is atomic on its own; for several, send BEGIN and
 * COMMIT yourself (and ROLLBACK on failure) inside `work`.
 */
export async function withRawConnection<T>(sequelize: Sequelize, work: (connection: RawConnection) => Promise<T>): Promise<T> {
  const client = (await sequelize.connectionManager.getConnection({ type: 'write' })) as unknown as ClientBase;
  try {
    return await work({ query: (statement) => runOn(client, statement) });
  } finally {
    sequelize.connectionManager.releaseConnection(client as never);
  }
}

/**
 * {@link withRawConnection} for a single statement.
 *
 * @returns the rows (none for a statement that returns none)
 * @throws see {@link withRawConnection}
 */
export async function rawQuery<R extends object>(sequelize: Sequelize, statement: RawStatement): Promise<R[]> {
  return withRawConnection(sequelize, (connection) => connection.query<R>(statement));
}

async function runOn<R extends object>(client: ClientBase, statement: RawStatement): Promise<R[]> {
  try {
    return (await client.query<R>(statement as QueryConfig)).rows;
  } catch (error) {
    const failure = error instanceof Error ? error : new Error(String(error));
    Object.assign(failure, { sql: statement.text, parameters: statement.values ?? [] });
    throw new DatabaseError(failure as ConstructorParameters<typeof DatabaseError>[0]);
  }
}
