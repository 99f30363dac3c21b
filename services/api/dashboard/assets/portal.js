// @ts-check
/**
 * Portal mode (docs/design.md §11.6): the page at /portal, opened by a one-time link
 * `<APP_URL>/portal#token=<token>` an operator gave one user. The token is taken off the
 * address bar at once and exchanged for a `ps_` session (`POST /api/v1/portal-sessions`), kept
 * in this tab's sessionStorage like the dashboard's credentials; a reload goes on with it.
 */
import { ApiError, clearCredentials, loadCredentials, request, saveCredentials } from './api.js';

/** Shown without a link or a session: the portal has no sign-in form. */
const NO_LINK = 'Open this page through the portal link you were given.';

/**
 * The session of this tab: from the link in the address bar, else the one kept from before.
 *
 * @returns {Promise<{credentials: import('./api.js').Credentials} | {closed: string}>} the
 *   session, or why there is none (fit to show)
 */
export async function openPortal() {
  const fragment = location.hash;
  if (!fragment) {
    const saved = loadCredentials();
    if (saved?.kind === 'portal' && Date.parse(saved.expiresAt) > Date.now()) return { credentials: saved };
    clearCredentials();
    return { closed: NO_LINK };
  }
  // Off the address bar (and so history, bookmarks and screen shares) before anything else.
  history.replaceState(null, '', location.pathname + location.search);
  clearCredentials();
  const token = /^#token=([A-Za-z0-9_-]{1,200})$/.exec(fragment)?.[1];
  if (!token) return { closed: `This link is incomplete. ${NO_LINK}` };
  try {
    const session = await request(null, 'POST', '/portal-sessions', { token });
    /** @type {import('./api.js').Credentials} */
    const credentials = { kind: 'portal', token: session.token, userId: session.user_id, scope: session.scope, expiresAt: session.expires_at };
    saveCredentials(credentials);
    return { credentials };
  } catch (error) {
    const message = error instanceof ApiError ? error.message : String(error);
    return { closed: error instanceof ApiError && error.status === 401 ? `${message} Ask for a new link.` : message };
  }
}
