import { MASKED } from '../../http/url-display';
import { RESERVED_HEADER_NAMES } from '../../webhook/reserved-headers';
import { DEFAULT_SIGNATURE_HEADER } from '../../webhook/signing';
import { InvalidEndpointError } from '../errors';

/** What a sensitive header's value reads as; sent back in a PATCH, it keeps the stored value. */
export { MASKED };

/** At most this many bytes of header names and values in all (docs/design.md §14.1). */
const HEADERS_MAX_BYTES = 4096;
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const HEADER_VALUE = /^[\x20-\x7e\t]*$/;
/**
 * Names an endpoint may not set (docs/design.md §14.1): the one reserved list, and the hex signature
 * header its deliveries carry.
 */
const isReservedHeader = (name: string): boolean => RESERVED_HEADER_NAMES.has(name) || name === DEFAULT_SIGNATURE_HEADER.toLowerCase();

/** Whether a header's value is a credential, shown masked (docs/design.md §14.1). */
export function isSensitiveHeader(name: string): boolean {
  return name === 'authorization' || name === 'proxy-authorization' || name === 'cookie' || /key|token|secret|auth/.test(name);
}

/** The headers as the API shows them: sensitive values masked. */
export function presentHeaders(headers: Record<string, string> | null | undefined): Record<string, string> {
  return Object.fromEntries(Object.entries(headers ?? {}).map(([name, value]) => [name, isSensitiveHeader(name) ? MASKED : value]));
}

/**
 * An endpoint's static headers as they are stored: names lowercase, each checked against docs/design.md
 * §14.1. With `stored`, a value of {@link MASKED} for a stored sensitive header keeps its value.
 *
 * @throws InvalidEndpointError naming the header: not an HTTP token, reserved, given twice,
 *   a value that is not printable, {@link MASKED} for a header with no stored value, or over 4 KB in all
 */
export function normalizeEndpointHeaders(input: Record<string, unknown>, stored: Record<string, string> = {}): Record<string, string> {
  const out: Record<string, string> = {};
  let bytes = 0;
  const reserved: string[] = [];
  for (const [rawName, rawValue] of Object.entries(input)) {
    if (!HEADER_NAME.test(rawName)) throw new InvalidEndpointError(`headers: "${rawName}" is not a valid HTTP header name.`);
    const name = rawName.toLowerCase();
    if (isReservedHeader(name)) {
      reserved.push(name);
      continue;
    }
    if (name in out) throw new InvalidEndpointError(`headers: "${name}" is given twice.`);
    if (typeof rawValue !== 'string' || !HEADER_VALUE.test(rawValue)) throw new InvalidEndpointError(`headers: the value of "${name}" must be a string of printable characters.`);
    let value = rawValue;
    if (value === MASKED) {
      if (!isSensitiveHeader(name) || stored[name] === undefined) throw new InvalidEndpointError(`headers: "${name}" has no stored value to keep; send its value.`);
      value = stored[name];
    }
    out[name] = value;
    bytes += Buffer.byteLength(name) + Buffer.byteLength(value);
  }
  if (reserved.length > 0) throw new InvalidEndpointError(`headers: ${reserved.join(', ')} cannot be set; the sender or HTTP sets ${reserved.length === 1 ? 'it' : 'them'}.`);
  if (bytes > HEADERS_MAX_BYTES) throw new InvalidEndpointError(`headers: at most ${HEADERS_MAX_BYTES} bytes of names and values in all.`);
  return out;
}

/** Stored masked headers a PATCH keeps: all of them when it sends no `headers`, else those it sends as {@link MASKED}. */
export function maskedHeadersKept(stored: Record<string, string>, given: Record<string, unknown> | undefined): string[] {
  const kept = given && new Set(Object.entries(given).flatMap(([name, value]) => (value === MASKED ? [name.toLowerCase()] : [])));
  return Object.keys(stored)
    .filter((name) => isSensitiveHeader(name) && (kept === undefined || kept.has(name)))
    .map((name) => `headers.${name}`);
}
