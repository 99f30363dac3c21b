/**
 * A timestamp as Date.prototype.toISOString() writes it (UTC, milliseconds truncated, as
 * node-postgres reads them), an SQL text expression: the one spelling of an ISO time written
 * by PostgreSQL, for JSON it builds and messages it composes.
 *
 * @param timestamp - an SQL timestamptz expression, such as `p.created_at` or `now()`
 */
export const isoTimeSql = (timestamp: string): string => `to_char(${timestamp} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
