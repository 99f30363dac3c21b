// @ts-check
/**
 * The dashboard's client of the public operations API (docs/design.md §11.1), same origin, /api/v1.
 * Credentials live in sessionStorage only: never a cookie (no ambient authority, so no CSRF)
 * and never a URL (no leaks through history or logs).
 */

/** The page runs in portal mode at /portal (docs/design.md §11.6): one user's view, opened by a link. */
export const PORTAL_MODE = /^\/portal\/?$/.test(location.pathname);

// Each mode keeps its own: a portal session never becomes the dashboard's sign-in, nor the reverse.
const STORAGE_KEY = PORTAL_MODE ? 'webhooks-portal.session' : 'webhooks-dashboard.credentials';

/**
 * A portal session (`ps_` token) acts as its user, reading (`read`) or also changing (`manage`)
 * their things, until `expiresAt` (ISO 8601).
 *
 * @typedef {{kind: 'service', key: string}
 *   | {kind: 'user', token: string, userId: number}
 *   | {kind: 'portal', token: string, userId: number, scope: 'read' | 'manage', expiresAt: string}} Credentials
 */

/** An answer other than 2xx, or no answer at all; `message` is fit to show. */
export class ApiError extends Error {
  /**
   * @param {number} status HTTP status, 0 when the request never got an answer
   * @param {string} message
   */
  constructor(status, message) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
  }
}

/**
 * Where the credentials are kept when the browser denies this page its sessionStorage (the
 * portal inside a cross-site iframe while third-party storage is blocked, as in Chromium by
 * default): this page's memory, so the session lasts until the page is left or reloaded.
 *
 * @type {string | null}
 */
let inMemory = null;

/** @returns {Storage | null} this tab's sessionStorage, or null where reading it throws */
function tabStorage() {
  try {
    return window.sessionStorage;
  } catch {
    return null;
  }
}

/** @returns {Credentials | null} the credentials of this tab's session */
export function loadCredentials() {
  try {
    const raw = tabStorage()?.getItem(STORAGE_KEY) ?? inMemory;
    return raw ? JSON.parse(raw) : null;
  } catch {
    return null;
  }
}

/** @param {Credentials} credentials */
export function saveCredentials(credentials) {
  const raw = JSON.stringify(credentials);
  try {
    const storage = tabStorage();
    if (storage) return void storage.setItem(STORAGE_KEY, raw);
  } catch {
    // Denied or full: memory below.
  }
  inMemory = raw;
}

export function clearCredentials() {
  inMemory = null;
  try {
    tabStorage()?.removeItem(STORAGE_KEY);
  } catch {
    // Nothing was kept there.
  }
}

/**
 * Sends one request to /api/v1 with the session's credentials.
 *
 * @param {Credentials | null} credentials null for the one route that takes none (opening a portal link)
 * @param {string} method
 * @param {string} path below /api/v1, with its query string
 * @param {unknown} [body] sent as JSON
 * @returns {Promise<any>} the parsed JSON body, or null for an empty one (204)
 * @throws {ApiError} with the API's own message in either layout's error shape
 */
export async function request(credentials, method, path, body) {
  /** @type {Record<string, string>} */
  const headers = { accept: 'application/json' };
  if (credentials?.kind === 'service') {
    headers.authorization = `Bearer ${credentials.key}`;
  } else if (credentials?.kind === 'portal') {
    headers.authorization = `Bearer ${credentials.token}`;
  } else if (credentials?.kind === 'user') {
    headers.authorization = `Bearer ${credentials.token}`;
    headers.user_id = String(credentials.userId);
  }
  if (body !== undefined) headers['content-type'] = 'application/json';
  let response;
  try {
    response = await fetch(`/api/v1${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'omit',
      cache: 'no-store',
    });
  } catch {
    throw new ApiError(0, 'The API did not answer. Check your connection and try again.');
  }
  const text = await response.text();
  let parsed = null;
  if (text) {
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = null;
    }
  }
  if (!response.ok) throw new ApiError(response.status, errorMessage(response, parsed));
  return parsed;
}

/**
 * The message of an error body: Layout A `{status, message}`, Layout B `{message}`, or
 * Layout B's `{error}` for a route it does not have.
 *
 * @param {Response} response
 * @param {any} body
 */
function errorMessage(response, body) {
  const message = body && typeof body === 'object' ? body.message ?? body.error : undefined;
  if (typeof message === 'string' && message) return message;
  return `The API answered ${response.status} ${response.statusText}`.trim() + '.';
}

/**
 * A query string of the set values only.
 *
 * @param {Record<string, string | number | null | undefined>} params
 */
export function query(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== '' && value !== null && value !== undefined) search.set(name, String(value));
  }
  const text = search.toString();
  return text ? `?${text}` : '';
}
