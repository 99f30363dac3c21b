import type { Client } from 'pg';

/** One statement's counters in pg_stat_statements (cumulative since the server's reset). */
export interface StatementCounters {
  calls: number;
  /** Execution time, ms. */
  execMs: number;
  query: string;
}

/** The run database's statements by queryid; empty when pg_stat_statements is not loaded. */
export type StatementSnapshot = Map<string, StatementCounters>;

/**
 * Reads pg_stat_statements for the client's own database, creating the extension there first
 * (the bench's databases are its own): the per-statement view behind pg_stat_database's
 * transaction count. The server must preload the library (`shared_preload_libraries`); when
 * it does not, the answer is empty rather than an error.
 */
export async function readStatements(client: Client): Promise<StatementSnapshot> {
  try {
    await client.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    const { rows } = await client.query<{ queryid: string; calls: string; exec_ms: number; query: string }>(
      `SELECT queryid::text AS queryid, calls, total_exec_time AS exec_ms, query FROM pg_stat_statements
        WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`,
    );
    return new Map(rows.map((row) => [row.queryid, { calls: Number(row.calls), execMs: Number(row.exec_ms), query: row.query }]));
  } catch {
    return new Map();
  }
}

/**
 * The statements run between two snapshots, per delivery, most calls first, those under
 * `minPerDelivery` calls left out: `calls/delivery × exec ms/call  statement` (its first 90
 * characters, whitespace squeezed).
 */
export function statementsPerDelivery(before: StatementSnapshot, after: StatementSnapshot, deliveries: number, minPerDelivery = 0.02): string[] {
  const rows: { calls: number; execMs: number; query: string }[] = [];
  for (const [id, now] of after) {
    const then = before.get(id);
    const calls = now.calls - (then?.calls ?? 0);
    if (calls / deliveries < minPerDelivery) continue;
    rows.push({ calls, execMs: now.execMs - (then?.execMs ?? 0), query: now.query });
  }
  return rows
    .sort((a, b) => b.calls - a.calls)
    .map((row) => `${(row.calls / deliveries).toFixed(2)}/delivery × ${(row.execMs / row.calls).toFixed(3)} ms  ${row.query.replace(/\s+/g, ' ').trim().slice(0, 90)}`);
}
