import { InvalidEndpointError } from '../errors';

/** A filter's bounds (docs/design.md §14.1). */
const FILTER_MAX_BYTES = 4096;
const FILTER_MAX_DEPTH = 5;

/**
 * Checks an endpoint's `filter` (docs/design.md §14.3): null, or a JSON object of at most
 * 4 KB and 5 levels of objects and arrays counted alike, matched by the database's
 * `webhook_filter_matches`. The depth is checked first, by a walk that stops at the first
 * value past the limit: a hostile filter nested a million levels costs no stack and is never
 * serialised.
 *
 * @throws InvalidEndpointError naming `filter` otherwise
 */
export function assertEndpointFilter(filter: unknown): asserts filter is Record<string, unknown> | null {
  if (filter === null) return;
  if (typeof filter !== 'object' || Array.isArray(filter)) throw new InvalidEndpointError('filter: must be a JSON object, or null.');
  if (exceedsDepth(filter, FILTER_MAX_DEPTH)) throw new InvalidEndpointError(`filter: at most ${FILTER_MAX_DEPTH} levels of objects and arrays.`);
  if (Buffer.byteLength(JSON.stringify(filter)) > FILTER_MAX_BYTES) throw new InvalidEndpointError(`filter: at most ${FILTER_MAX_BYTES} bytes of JSON.`);
}

/** Whether objects and arrays nest deeper than `limit` levels in `root` (itself level 1); iterative. */
function exceedsDepth(root: object, limit: number): boolean {
  const pending: { value: object; level: number }[] = [{ value: root, level: 1 }];
  for (let next = pending.pop(); next; next = pending.pop()) {
    for (const child of Object.values(next.value)) {
      if (child === null || typeof child !== 'object') continue;
      if (next.level === limit) return true;
      pending.push({ value: child, level: next.level + 1 });
    }
  }
  return false;
}
