import { InvalidCursorError } from './errors';

/**
 * A list position: the (created_at, id) of the last item shown. `createdAt` is PostgreSQL's
 * timestamp in microseconds since the epoch, as text, because a JavaScript Date keeps only
 * milliseconds and a keyset compared at a coarser precision would skip or repeat rows.
 */
export interface Keyset {
  createdAtMicros: string;
  id: string;
}

/** One page of a list (docs/design.md §11.1): `{"data":[...],"next_cursor":"<opaque>"|null}`. */
export interface Page<T> {
  data: T[];
  next_cursor: string | null;
}

/** Encodes a keyset as an opaque base64url token. */
export function encodeCursor(keyset: Keyset): string {
  return Buffer.from(JSON.stringify([keyset.createdAtMicros, keyset.id]), 'utf8').toString('base64url');
}

/**
 * Decodes a token made by {@link encodeCursor}.
 *
 * @throws InvalidCursorError for anything else
 */
export function decodeCursor(cursor: string): Keyset {
  try {
    const value: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (
      Array.isArray(value) &&
      value.length === 2 &&
      typeof value[0] === 'string' &&
      /^-?\d{1,20}$/.test(value[0]) &&
      typeof value[1] === 'string' &&
      value[1].length > 0 &&
      value[1].length <= 200
    ) {
      return { createdAtMicros: value[0], id: value[1] };
    }
  } catch (error) {
    throw new InvalidCursorError({ cause: error });
  }
  throw new InvalidCursorError();
}

/**
 * Pages `rows`, read with `limit + 1` so a next page is known without a count: the extra row
 * is dropped and the cursor points after the last row kept.
 */
export function toPage<R extends { created_at_micros: string }, T>(
  rows: R[],
  limit: number,
  keyOf: (row: R) => string,
  present: (row: R) => T,
): Page<T> {
  const shown = rows.slice(0, limit);
  const last = shown[shown.length - 1];
  const next = rows.length > limit && last ? encodeCursor({ createdAtMicros: last.created_at_micros, id: keyOf(last) }) : null;
  return { data: shown.map(present), next_cursor: next };
}
