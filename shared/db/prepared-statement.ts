import { DatabaseError, Sequelize } from 'sequelize';

/**
 * A statement PostgreSQL parses and plans once per connection and then only executes: a
 * named prepared statement of the extended query protocol (PostgreSQL manual, "Message
 * Flow: Extended Query"), which node-postgres creates on a connection's first use of the
 * name. For hot statements whose planning costs more than their execution (the worker's
 * claim and record: planning their CTEs was two thirds of PostgreSQL's CPU per statement).
 */
export interface PreparedStatement {
  /** Unique per text within the process: one name always means one text. */
  readonly name: string;
  readonly text: string;
}

/** A node-postgres client as Sequelize's pool hands it out. */
interface PooledClient {
  query(config: { name: string; text: string; values: unknown[] }): Promise<{ rows: unknown[] }>;
  /** Sequelize's pool drops a connection so marked instead of lending it again. */
  _invalid?: boolean;
}

// The node-postgres errors after which Sequelize itself stops lending the connection.
const BROKEN_CONNECTION = /Connection terminated|not queryable|Query read timeout|ECONNRESET/i;

/**
 * Runs a prepared statement on a connection of Sequelize's own pool (one pool, one size per
 * process), past Sequelize's query pipeline: no SQL rewriting, no bind formatting, no model
 * mapping. Rows come back as node-postgres parses them, with the types Sequelize's
 * connections use.
 *
 * @param values - one per `$n` of the text
 * @returns the rows
 * @throws Sequelize's ConnectionError subclasses when no connection can be had, and every
 *   statement error as a Sequelize DatabaseError whose `original` is node-postgres's error
 *   (SQLSTATE in `code`), so callers tell "PostgreSQL away" from "bad statement" as they do
 *   for Sequelize's own queries
 */
export async function runPrepared<Row>(sequelize: Sequelize, statement: PreparedStatement, values: unknown[]): Promise<Row[]> {
  const connections = sequelize.connectionManager as unknown as {
    getConnection(options: { type: 'write' }): Promise<PooledClient>;
    releaseConnection(connection: PooledClient): void;
  };
  const connection = await connections.getConnection({ type: 'write' });
  try {
    const result = await connection.query({ name: statement.name, text: statement.text, values });
    return result.rows as Row[];
  } catch (error) {
    if (error instanceof Error && BROKEN_CONNECTION.test(`${(error as { code?: string }).code ?? ''} ${error.message}`)) {
      connection._invalid = true;
    }
    throw new DatabaseError(error as Error & { sql: string; parameters: object });
  } finally {
    connections.releaseConnection(connection);
  }
}
