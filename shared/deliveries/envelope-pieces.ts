import { isoTimeSql } from '../db/iso-time-sql';
import { serializeEnvelope } from '../webhook/signing';

/**
 * The envelope of `data` (docs/design.md §7, exactly as serializeEnvelope writes it) cut around the
 * values of `holes`, for a statement that only learns those values while it runs (a pid from a
 * sequence, timestamps from now()): the envelope is `pieces[0] + JSON of data[holes[0]] +
 * pieces[1] + ...`. Each hole is cut at a placeholder string holding a NUL character, which no
 * other string of the data can produce (PostgreSQL text cannot hold NUL, and the api refuses it).
 *
 * @param holes - keys of `data`, in the order they come in it
 * @returns holes.length + 1 pieces
 * @throws EncryptionError (shared/webhook) when `data` is not serialisable
 * @throws Error when a placeholder is not found exactly once, in order (a string of `data` holding NUL)
 */
export function splitEnvelope(data: Record<string, unknown>, event: string, holes: readonly string[]): string[] {
  const marked: Record<string, unknown> = { ...data };
  for (const hole of holes) marked[hole] = `\u0000${hole}`;
  const envelope = serializeEnvelope(marked, { event, signable: true });
  const pieces: string[] = [];
  let from = 0;
  for (const hole of holes) {
    const placeholder = JSON.stringify(`\u0000${hole}`);
    const at = envelope.indexOf(placeholder, from);
    if (at < 0 || envelope.indexOf(placeholder, at + 1) >= 0) throw new Error(`Cannot cut the envelope at ${hole}: its data holds a NUL character.`);
    pieces.push(envelope.slice(from, at));
    from = at + placeholder.length;
  }
  pieces.push(envelope.slice(from));
  return pieces;
}

/**
 * A timestamp column as the JSON string Date.prototype.toISOString() writes (milliseconds
 * truncated, as node-postgres reads them), an SQL text expression: the value of a hole of
 * {@link splitEnvelope} that PostgreSQL gives.
 */
export const isoJsonSql = (column: string): string => `'"' || ${isoTimeSql(column)} || '"'`;

/**
 * The envelope as an SQL text expression: the pieces of {@link splitEnvelope} (SQL
 * expressions, such as columns holding them) joined around the JSON of each hole's value.
 *
 * @param values - one SQL text expression per hole, in order, each the JSON of its value
 *   (such as `p.pid::text` or {@link isoJsonSql})
 */
export function joinEnvelopeSql(pieces: readonly string[], values: readonly string[]): string {
  return pieces.map((piece, index) => (index < values.length ? `${piece} || ${values[index]}` : piece)).join(' || ');
}
