import type { EndpointAuth } from '../../db';
import { shownUrl } from '../../http/url-display';
import { InvalidEndpointError } from '../errors';
import { MASKED } from './headers';
import { originOf } from './origin';

/** `auth` as the API shows it (docs/design.md §14.4): the client secret masked, optional fields null when absent. */
export interface EndpointAuthView {
  type: EndpointAuth['type'];
  token_url: string;
  client_id: string;
  /** Always `********`; sent back in a PATCH, it keeps the stored secret (same token origin only). */
  client_secret: typeof MASKED;
  scope: string | null;
  audience: string | null;
}

const FIELDS = new Set(['type', 'token_url', 'client_id', 'client_secret', 'scope', 'audience']);
/** Printable characters only (no control characters): the values go into a form body and a Basic header. */
const PRINTABLE = /^[^\u0000-\u001f\u007f]+$/;
/** RFC 6749 §3.3: scope tokens of %x21 / %x23-5B / %x5D-7E, separated by single spaces. */
const SCOPE = /^[\x21\x23-\x5b\x5d-\x7e]+( [\x21\x23-\x5b\x5d-\x7e]+)*$/;

/** The API's view of stored `auth`. */
export function presentAuth(auth: EndpointAuth | null | undefined): EndpointAuthView | null {
  if (!auth) return null;
  return {
    type: auth.type,
    token_url: auth.token_url,
    client_id: auth.client_id,
    client_secret: MASKED,
    scope: auth.scope ?? null,
    audience: auth.audience ?? null,
  };
}

/**
 * An endpoint's `auth` as it is stored (docs/design.md §14.4): null, or OAuth2 client
 * credentials (RFC 6749 §4.4) `{type: "oauth2_client_credentials", token_url, client_id,
 * client_secret, scope?, audience?}`. A PATCH replaces it whole; `client_secret: "********"`
 * keeps the stored secret, but only for a token URL on the stored one's origin: the secret is
 * sent there, so a new token origin needs it given again.
 *
 * @param stored - the endpoint's current `auth` (null on create)
 * @throws InvalidEndpointError naming the field: not an object, an unknown field or type, a
 *   token URL that is not http(s), an empty or unprintable value, a scope that is not RFC 6749
 *   scope tokens, a masked secret with none to keep or for another token origin
 */
export function normalizeEndpointAuth(input: unknown, stored: EndpointAuth | null): EndpointAuth | null {
  if (input === null) return null;
  if (typeof input !== 'object' || Array.isArray(input)) throw new InvalidEndpointError('auth: must be an object, or null.');
  const fields = input as Record<string, unknown>;
  const unknown = Object.keys(fields).filter((name) => !FIELDS.has(name));
  if (unknown.length > 0) throw new InvalidEndpointError(`auth: unknown ${unknown.length === 1 ? 'field' : 'fields'} ${unknown.join(', ')}.`);
  if (fields.type !== 'oauth2_client_credentials') throw new InvalidEndpointError('auth.type: must be "oauth2_client_credentials".');
  const tokenUrl = text(fields, 'token_url', 2048);
  assertHttpUrl(tokenUrl);
  const auth: EndpointAuth = {
    type: 'oauth2_client_credentials',
    token_url: tokenUrl,
    client_id: text(fields, 'client_id', 1024),
    client_secret: text(fields, 'client_secret', 1024),
  };
  const scope = optionalText(fields, 'scope', 1024);
  if (scope !== undefined && !SCOPE.test(scope)) throw new InvalidEndpointError('auth.scope: space-separated scope tokens (RFC 6749 §3.3).');
  const audience = optionalText(fields, 'audience', 2048);
  if (scope !== undefined) auth.scope = scope;
  if (audience !== undefined) auth.audience = audience;
  if (auth.client_secret !== MASKED) return auth;
  if (!stored) throw new InvalidEndpointError('auth.client_secret: there is no stored secret to keep; send its value.');
  if (originOf(auth.token_url) !== originOf(stored.token_url)) {
    throw new InvalidEndpointError('auth.token_url: a token endpoint at another origin needs auth.client_secret given again in the same change; send its value.');
  }
  return { ...auth, client_secret: stored.client_secret };
}

/**
 * The stored client secret a change carries over without giving it again (named as a 400
 * names it): when it leaves `auth` out, or sends the secret as {@link MASKED}.
 */
export function maskedAuthKept(stored: EndpointAuth | null, given: unknown): string[] {
  if (!stored || given === null) return [];
  const secret = typeof given === 'object' && !Array.isArray(given) ? (given as Record<string, unknown> | undefined)?.client_secret : undefined;
  return given === undefined || secret === MASKED ? ['auth.client_secret'] : [];
}

function text(fields: Record<string, unknown>, name: string, maxLength: number): string {
  const value = fields[name];
  if (typeof value !== 'string' || value === '') throw new InvalidEndpointError(`auth.${name}: a non-empty string is required.`);
  if (value.length > maxLength || !PRINTABLE.test(value)) throw new InvalidEndpointError(`auth.${name}: at most ${maxLength} printable characters.`);
  return value;
}

function optionalText(fields: Record<string, unknown>, name: string, maxLength: number): string | undefined {
  return fields[name] === undefined || fields[name] === null ? undefined : text(fields, name, maxLength);
}

function assertHttpUrl(url: string): void {
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {
    parsed = undefined;
  }
  if (parsed?.protocol !== 'http:' && parsed?.protocol !== 'https:') throw new InvalidEndpointError(`auth.token_url: must be an http or https URL: ${shownUrl(url)}`);
  if (parsed.username || parsed.password) throw new InvalidEndpointError('auth.token_url: no credentials in the URL; use client_id and client_secret.');
}
