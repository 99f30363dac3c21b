// @ts-check
/**
 * The signed-in principal of this tab and the one way the views call the API with it.
 */
import { ApiError, request } from './api.js';

/** @type {import('./api.js').Credentials | null} */
let credentials = null;
/** @type {(message: string) => void} */
let onRejected = () => undefined;

/** @param {import('./api.js').Credentials | null} signedIn */
export function setSession(signedIn) {
  credentials = signedIn;
}

/**
 * Whether the signed-in principal may change things: everyone but a `read` portal session,
 * whose view then offers no button that the API would refuse.
 */
export function canChange() {
  return credentials?.kind !== 'portal' || credentials.scope === 'manage';
}

/**
 * Called when the API refuses the session's credentials (401): revoked, rotated or expired.
 *
 * @param {(message: string) => void} handler given the API's message
 */
export function onSessionRejected(handler) {
  onRejected = handler;
}

/**
 * One request to /api/v1 as the signed-in principal.
 *
 * @param {string} method
 * @param {string} path below /api/v1, with its query string
 * @param {unknown} [body]
 * @returns {Promise<any>} the parsed JSON body, null when empty
 * @throws {ApiError} the API's answer; a 401 also ends the session
 */
export async function api(method, path, body) {
  if (!credentials) throw new ApiError(401, 'Sign in first.');
  try {
    return await request(credentials, method, path, body);
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) onRejected(error.message);
    throw error;
  }
}
