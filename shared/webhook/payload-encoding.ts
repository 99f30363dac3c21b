import { randomBytes } from 'node:crypto';

/** Where `send()` puts the payload (Luminova's request fields). */
export type SendField = 'query' | 'body' | 'form_params' | 'multipart';
export const SEND_FIELDS: readonly SendField[] = ['query', 'body', 'form_params', 'multipart'];

/** What travels for one field: the bytes that are signed and sent, and their Content-Type. */
export interface EncodedPayload {
  /** The HTTP body, or for `query` the query string to append. */
  bytes: Buffer;
  /** Absent for `query`, which sends no body. */
  contentType?: string;
}

/**
 * Encodes a serialised envelope for one field. `body` is the JSON itself; the others carry
 * the envelope flattened into form fields ({@link flattenFields}).
 */
export function encodeForField(field: SendField, envelopeJson: string): EncodedPayload {
  if (field === 'body') return { bytes: Buffer.from(envelopeJson, 'utf8'), contentType: 'application/json' };
  const fields = flattenFields(JSON.parse(envelopeJson));
  if (field === 'multipart') {
    const { body, contentType } = encodeMultipart(fields);
    return { bytes: body, contentType };
  }
  const encoded = Buffer.from(encodeUrlencoded(fields), 'utf8');
  return field === 'query' ? { bytes: encoded } : { bytes: encoded, contentType: 'application/x-www-form-urlencoded' };
}

/** A form field: name and text value. */
export type FormField = readonly [name: string, value: string];

/**
 * Flattens a JSON value into form fields the way PHP's `http_build_query()` does (what
 * Luminova's HTTP client sends for `query`, `form_params` and `multipart`): nested keys become
 * `a[b][0]`, `true`/`false` become `1`/`0`, null and empty objects or arrays are left out.
 */
export function flattenFields(value: unknown, prefix = ''): FormField[] {
  if (value === null || value === undefined) return [];
  if (typeof value === 'object') {
    return Object.entries(value as Record<string, unknown>).flatMap(([key, inner]) =>
      flattenFields(inner, prefix ? `${prefix}[${key}]` : key),
    );
  }
  if (typeof value === 'boolean') return [[prefix, value ? '1' : '0']];
  return [[prefix, String(value)]];
}

/** `application/x-www-form-urlencoded` text of the fields (WHATWG URL standard; spaces as `+`). */
export function encodeUrlencoded(fields: readonly FormField[]): string {
  return new URLSearchParams(fields.map(([name, value]): [string, string] => [name, value])).toString();
}

/**
 * A complete `multipart/form-data` body (RFC 7578) with a random boundary, built here so that
 * the signed bytes are exactly the bytes sent.
 *
 * @returns the body and the Content-Type header value carrying its boundary
 */
export function encodeMultipart(fields: readonly FormField[]): { body: Buffer; contentType: string } {
  const boundary = `----webhook${randomBytes(12).toString('hex')}`;
  const parts = fields.map(
    ([name, value]) => `--${boundary}\r\nContent-Disposition: form-data; name="${escapeName(name)}"\r\n\r\n${value}\r\n`,
  );
  return {
    body: Buffer.from(`${parts.join('')}--${boundary}--\r\n`, 'utf8'),
    contentType: `multipart/form-data; boundary=${boundary}`,
  };
}

// Field names are quoted strings: the HTML standard percent-encodes these three characters.
function escapeName(name: string): string {
  return name.replace(/"/g, '%22').replace(/\r/g, '%0D').replace(/\n/g, '%0A');
}
