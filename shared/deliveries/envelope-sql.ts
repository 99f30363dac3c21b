import { isoTimeSql } from '../db/iso-time-sql';
import { encodeJson, EVENT_KEY, SIGN_KEY } from '../webhook/envelope';

/**
 * The docs/design.md §7 envelope written by PostgreSQL from a row's columns, byte for byte what
 * `eventEnvelope` (event-data.ts) writes for the same values: for a statement whose event data
 * holds values only PostgreSQL knows until it runs (a pid from a sequence, timestamps from
 * now()), so the body is made once, in the statement, from the row as stored.
 */

/** An SQL string literal holding `text`. */
const literal = (text: string): string => `'${text.replace(/'/g, "''")}'`;

/**
 * The JSON of an SQL text expression as encodeJson writes it (NULL: `null`). to_json escapes
 * what JSON.stringify escapes (`"`, `\`, \b \f \n \r \t, other control characters as
 * lowercase `\u00xx`) and nothing else; U+2028 and U+2029 are escaped on top, as encodeJson
 * does. PostgreSQL text holds no NUL and no lone surrogate, the only characters where the two
 * could differ.
 */
export const jsonTextSql = (text: string): string =>
  // The two characters themselves, not chr(8232): chr() fails in a SQL_ASCII database, where
  // text is its UTF-8 bytes and a literal of the same bytes still matches.
  `COALESCE(replace(replace(to_json((${text})::text)::text, '\u2028', '\\u2028'), '\u2029', '\\u2029'), 'null')`;

/**
 * A timestamp column as the JSON string Date.prototype.toISOString() writes (milliseconds
 * truncated, as node-postgres reads them), an SQL text expression.
 */
export const isoJsonSql = (column: string): string => `'"' || ${isoTimeSql(column)} || '"'`;

/**
 * A JSON object as an SQL text expression, its keys in the order given, as encodeJson writes
 * an object.
 *
 * @param fields - each key with the SQL text expression of its value's JSON (such as
 *   `p.pid::text`, {@link jsonTextSql} or {@link isoJsonSql})
 */
export function jsonObjectSql(fields: readonly (readonly [key: string, json: string])[]): string {
  const members = fields.map(([key, json], index) => `${literal(`${index === 0 ? '' : ','}${encodeJson(key)}:`)} || ${json}`);
  return `'{' || ${members.join(' || ')} || '}'`;
}

/**
 * The signable envelope of an event as an SQL text expression: the bytes serializeEnvelope
 * (shared/webhook/envelope.ts) writes with `{ event, signable: true }`.
 *
 * @param event - an SQL text expression: the event's name
 * @param data - an SQL text expression: the JSON of its data, non-empty (such as {@link jsonObjectSql})
 */
export function eventEnvelopeSql(event: string, data: string): string {
  const config = jsonObjectSql([
    [EVENT_KEY, jsonTextSql(event)],
    [SIGN_KEY, `'1'`],
  ]);
  return jsonObjectSql([
    ['_data', data],
    ['_config', config],
  ]);
}
