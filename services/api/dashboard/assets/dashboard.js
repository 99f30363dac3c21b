// @ts-check
/**
 * The webhooks dashboard (docs/design.md §11.5): signing in and out, and the views of charts.js,
 * endpoints.js and deliveries.js, all through the public /api/v1 routes with the signed-in principal's
 * credentials. At /portal it runs in portal mode (portal.js): one user's view, opened by a
 * link, with no sign-in form.
 */
import { ApiError, clearCredentials, loadCredentials, PORTAL_MODE, request, saveCredentials } from './api.js';
import { initCharts, loadCharts, resetCharts } from './charts.js';
import { ATTEMPT_LANDED, initDeliveries, loadDeliveries, resetDeliveries } from './deliveries.js';
import { byId, h, localZone, replace } from './dom.js';
import { initEndpoints, loadEndpoints, resetEndpoints } from './endpoints.js';
import { clearMessages, showError } from './messages.js';
import { openPortal } from './portal.js';
import { onSessionRejected, setSession } from './session.js';

function showSignIn() {
  byId('sign-in').hidden = false;
  byId('app').hidden = true;
  byId('who').hidden = true;
}

/** Portal mode has no sign-in form: an ended session leaves only why. @param {string} reason */
function showPortalClosed(reason) {
  byId('portal-closed-text').textContent = reason;
  byId('portal-closed').hidden = false;
  byId('app').hidden = true;
  byId('who').hidden = true;
}

/** @param {string} [reason] shown on the sign-in form (portal mode: in place of the view) */
function signOut(reason) {
  setSession(null);
  clearCredentials();
  resetCharts();
  resetEndpoints();
  resetDeliveries();
  clearMessages();
  if (PORTAL_MODE) return showPortalClosed(reason ?? 'You ended this portal session. Open a new link to come back.');
  if (reason) showError(reason);
  showSignIn();
}

/** @param {SubmitEvent} event */
async function onSignIn(event) {
  event.preventDefault();
  clearMessages();
  const form = /** @type {HTMLFormElement} */ (event.target);
  const data = new FormData(form);
  /** @type {import('./api.js').Credentials} */
  let candidate;
  if (data.get('kind') === 'user') {
    const token = String(data.get('token') ?? '').trim();
    const userId = Number(data.get('userId'));
    if (!token || !Number.isInteger(userId) || userId < 1) return showError('Enter your token and your user id.');
    candidate = { kind: 'user', token, userId };
  } else {
    const key = String(data.get('key') ?? '').trim();
    if (!key.startsWith('sk_')) return showError('A service key starts with sk_.');
    candidate = { kind: 'service', key };
  }
  let catalog = null;
  try {
    // Any principal may read the event catalog: a 401 here means the credentials are wrong.
    catalog = await request(candidate, 'GET', '/event-types');
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return showError(`Sign-in refused: ${error.message}`);
  }
  saveCredentials(candidate);
  form.reset();
  toggleKindFields(form);
  await enter(candidate, catalog);
}

/** @param {HTMLFormElement} form */
function toggleKindFields(form) {
  const kind = new FormData(form).get('kind');
  for (const field of form.querySelectorAll('[data-kind]')) {
    /** @type {HTMLElement} */ (field).hidden = field.getAttribute('data-kind') !== kind;
  }
}

/**
 * @param {import('./api.js').Credentials} signedIn
 * @param {any} [catalog] the event catalog, when signing in already read it
 */
async function enter(signedIn, catalog) {
  setSession(signedIn);
  const who =
    signedIn.kind === 'service'
      ? `Service key …${signedIn.key.slice(-4)}`
      : signedIn.kind === 'portal'
        ? `User ${signedIn.userId} · portal · ${signedIn.scope === 'read' ? 'read only' : 'manage'}`
        : `User ${signedIn.userId}`;
  byId('who-label').textContent = `${who} · times in ${localZone()}`;
  byId('who').hidden = false;
  // Portal mode has removed the form.
  document.getElementById('sign-in')?.setAttribute('hidden', '');
  byId('app').hidden = false;
  resetCharts();
  resetEndpoints();
  resetDeliveries();
  await Promise.all([loadCharts(), loadEndpoints(), loadDeliveries(), loadEventNames(signedIn, catalog)]);
}

/**
 * The event filter's suggestions; the filter still takes any name (ad-hoc sends are not
 * limited to the catalog), so a failure here only leaves it without suggestions.
 *
 * @param {import('./api.js').Credentials} signedIn
 * @param {any} [catalog]
 */
async function loadEventNames(signedIn, catalog) {
  try {
    const types = catalog ?? (await request(signedIn, 'GET', '/event-types'));
    /** @type {string[]} */
    const names = Array.isArray(types?.data) ? types.data.map((/** @type {any} */ type) => String(type.name)) : [];
    replace(byId('event-names'), names.map((name) => h('option', { value: name })));
  } catch {
    replace(byId('event-names'));
  }
}

/** Portal mode: the link's session, or why there is none; never a sign-in form. */
async function startPortal() {
  document.title = 'Webhooks portal';
  byId('sign-in').remove();
  byId('sign-out').textContent = 'End session';
  const opened = await openPortal();
  if ('closed' in opened) showPortalClosed(opened.closed);
  else await enter(opened.credentials);
}

function start() {
  byId('sign-out').addEventListener('click', () => signOut());
  byId('error-close').addEventListener('click', () => (byId('error').hidden = true));
  initCharts();
  initEndpoints();
  initDeliveries();
  onSessionRejected((message) =>
    signOut(PORTAL_MODE ? `Your portal session has ended: ${message} Ask for a new link.` : `Signed out: ${message}`),
  );
  // A new attempt changes the endpoints' health and charts.
  document.addEventListener(ATTEMPT_LANDED, () => Promise.all([loadEndpoints(), loadCharts()]));
  if (PORTAL_MODE) return void startPortal();
  const form = /** @type {HTMLFormElement} */ (byId('sign-in-form'));
  form.addEventListener('submit', onSignIn);
  form.addEventListener('change', () => toggleKindFields(form));
  const saved = loadCredentials();
  if (saved) enter(saved);
  else showSignIn();
}

start();
