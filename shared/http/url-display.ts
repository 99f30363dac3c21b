/** What a credential in a URL (or a sensitive header's value) reads as where it is shown masked. */
export const MASKED = '********';

/** Query parameters whose values are credentials (`api_key`, `access_token`, `sig`, `auth`, ...). */
const SENSITIVE_NAME = /key|token|secret|sig|auth/i;
const UNPARSED_USERINFO = /^([a-z][a-z0-9+.-]*:\/\/)[^/?#]*@/i;

/**
 * A URL as a reason, an event's fields, a log line, an error or a metric shows it
 * (docs/design.md §6.6, §11.3): without userinfo, query string or fragment, which may hold credentials;
 * otherwise as given. A string that does not parse as a URL loses the same parts by its text.
 */
export function shownUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return url.split(/[?#]/, 1)[0].replace(UNPARSED_USERINFO, '$1');
  }
  if (!parsed.username && !parsed.password && !parsed.search && !parsed.hash) return url;
  parsed.username = '';
  parsed.password = '';
  parsed.search = '';
  parsed.hash = '';
  return parsed.toString();
}

/** Whether a query parameter's value is a credential: its name contains key, token, secret, sig or auth, in any case. */
export function isSensitiveQueryName(name: string): boolean {
  return SENSITIVE_NAME.test(decodeQueryPart(name));
}

/**
 * A URL as the endpoint, delivery and attempt objects show it (docs/design.md §11.3): in full, but
 * with the value of each sensitive query parameter ({@link isSensitiveQueryName}) and any
 * userinfo password read as {@link MASKED}. The rest of the query keeps its bytes, so that
 * {@link unmaskUrl} can give the stored values back.
 */
export function maskedUrl(url: string): string {
  const { base, query, fragment } = splitQuery(url);
  const masked = query === null ? base : `${base}?${mapSensitiveValues(query, () => MASKED)}`;
  return withoutPassword(masked) + fragment;
}

/**
 * The URL a PATCH stores when it sends one back as {@link maskedUrl} showed it: each sensitive
 * query parameter whose value is {@link MASKED} takes the stored value of the parameter of that
 * name (the n-th of that name for the n-th), so a client that edits another part of the URL keeps
 * the credential it never saw. Parameters the stored URL does not have stay as given.
 *
 * @param given - the URL sent
 * @param stored - the URL stored now
 */
export function unmaskUrl(given: string, stored: string): string {
  const parts = splitQuery(given);
  if (parts.query === null) return given;
  const storedValues = new Map<string, string[]>();
  for (const [name, value] of queryPairs(splitQuery(stored).query)) {
    const key = decodeQueryPart(name);
    if (value !== null) storedValues.set(key, [...(storedValues.get(key) ?? []), value]);
  }
  const seen = new Map<string, number>();
  const query = mapSensitiveValues(parts.query, (name, value) => {
    const key = decodeQueryPart(name);
    const index = seen.get(key) ?? 0;
    seen.set(key, index + 1);
    return value === MASKED ? (storedValues.get(key)?.[index] ?? value) : value;
  });
  return `${parts.base}?${query}${parts.fragment}`;
}

/** The names of sensitive query parameters a URL gives as {@link MASKED}, decoded, in order. */
export function maskedQueryNames(url: string): string[] {
  return queryPairs(splitQuery(url).query)
    .filter(([name, value]) => value === MASKED && isSensitiveQueryName(name))
    .map(([name]) => decodeQueryPart(name));
}

// The raw text before the query, the query without `?` (null when there is none) and the
// fragment with its `#`. A `?` cannot appear in an http(s) URL's authority, so the first one
// before any `#` starts the query.
function splitQuery(url: string): { base: string; query: string | null; fragment: string } {
  const hash = url.indexOf('#');
  const beforeHash = hash === -1 ? url : url.slice(0, hash);
  const fragment = hash === -1 ? '' : url.slice(hash);
  const mark = beforeHash.indexOf('?');
  if (mark === -1) return { base: beforeHash, query: null, fragment };
  return { base: beforeHash.slice(0, mark), query: beforeHash.slice(mark + 1), fragment };
}

/** `name=value` pairs of a raw query, still encoded; a pair without `=` has the value null. */
function queryPairs(query: string | null): [string, string | null][] {
  if (query === null || query === '') return [];
  return query.split('&').map((pair) => {
    const equals = pair.indexOf('=');
    return equals === -1 ? [pair, null] : [pair.slice(0, equals), pair.slice(equals + 1)];
  });
}

function mapSensitiveValues(query: string, map: (name: string, value: string) => string): string {
  return queryPairs(query)
    .map(([name, value]) => (value !== null && isSensitiveQueryName(name) ? `${name}=${map(name, value)}` : value === null ? name : `${name}=${value}`))
    .join('&');
}

function withoutPassword(url: string): string {
  const match = /^(https?:\/\/)([^/?#]*)@/i.exec(url);
  if (!match || !match[2].includes(':')) return url;
  return `${match[1]}${match[2].slice(0, match[2].indexOf(':'))}:${MASKED}@${url.slice(match[0].length)}`;
}

function decodeQueryPart(part: string): string {
  try {
    return decodeURIComponent(part.replace(/\+/g, ' '));
  } catch {
    return part;
  }
}
