import { ConnectionError, type Sequelize } from 'sequelize';
import { StandbyReachedError, spoilsConnection } from './errors';

/** A node-postgres client as Sequelize's pool holds it: `_invalid` makes the pool drop it. */
interface PooledClient {
  query(...args: unknown[]): unknown;
  end(): Promise<void>;
  _invalid?: boolean;
}

/**
 * Readies a new connection in one round trip: `plan_cache_mode` (below) and whether the server
 * is a standby. A primary's connection that reached a standby (an address not yet moved
 * after a failover, a standby taking the old primary's name) is closed and reported as
 * Sequelize's ConnectionError around {@link StandbyReachedError}: an outage (503, a job
 * postponed), never a write failing later with 25006, nor a read served stale. A connection
 * that cannot take the set-up (the server went away meanwhile) is closed and reported the same way.
 *
 * The hot statements (claim, record, outbox marks, creates) are prepared once per connection
 * and name a day partition by parameter (docs/design.md §3.4). PostgreSQL would re-plan each of them at
 * every execution: a custom plan that prunes the other days at plan time looks far cheaper
 * than the generic one, which prunes them at start-up. Planning then cost more than running
 * (0.77 ms against 0.34 ms for the claim). A generic plan is planned once per connection.
 * A SET, not a start-up option: connection poolers refuse unknown start-up parameters.
 *
 * @param acceptStandby - true for a read replica's pool, which is a standby by design
 * @param timeoutMs - bound of the round trip
 * @throws ConnectionError as above
 */
export async function prepareConnection(connection: unknown, acceptStandby: boolean, timeoutMs: number): Promise<void> {
  const client = connection as PooledClient;
  let standby: boolean;
  try {
    // Two statements, no parameters: one simple-query message, one answer per statement.
    const results = (await client.query({
      text: 'SET plan_cache_mode = force_generic_plan; SELECT pg_is_in_recovery() AS standby',
      query_timeout: timeoutMs,
    })) as [unknown, { rows: { standby: boolean }[] }];
    standby = results[1].rows[0].standby;
  } catch (error) {
    client.end().catch(() => undefined);
    throw new ConnectionError(error instanceof Error ? error : new Error(String(error)));
  }
  if (standby && !acceptStandby) {
    client.end().catch(() => undefined);
    throw new ConnectionError(new StandbyReachedError());
  }
  markSpoiledOnFailure(client);
}

/**
 * Makes each failed statement on `client` that {@link spoilsConnection} names mark it invalid
 * as it fails, before its caller sees the error, whichever path sent it (Sequelize's queries
 * and transactions, shared/db/raw-query.ts): a connection to a server that turned read-only
 * or is shutting down must not be lent again, so the next loan connects anew and reaches
 * whatever the address points to now.
 */
function markSpoiledOnFailure(client: PooledClient): void {
  const query = client.query.bind(client);
  const mark = (error: unknown) => {
    if (spoilsConnection(error)) client._invalid = true;
  };
  client.query = (...args: unknown[]) => {
    const callback = args.at(-1);
    if (typeof callback === 'function') {
      args[args.length - 1] = (error: unknown, result: unknown) => {
        if (error) mark(error);
        (callback as (error: unknown, result: unknown) => void)(error, result);
      };
      return query(...args);
    }
    const result = query(...args);
    // Registered before the caller's own handler, so it runs first; the caller still gets the rejection.
    if (result instanceof Promise) void result.catch(mark);
    return result;
  };
}

/**
 * Makes `sequelize` close a connection marked invalid when it is given back, instead of
 * keeping it idle until its next loan: it leaves the pool at once (docs/design.md §13.3).
 */
export function destroySpoiledOnRelease(sequelize: Sequelize): void {
  const manager = sequelize.connectionManager;
  const release = manager.releaseConnection.bind(manager);
  manager.releaseConnection = (connection) => {
    if ((connection as PooledClient)._invalid) void manager.destroyConnection(connection).catch(() => undefined);
    else release(connection);
  };
}
