// @ts-check
/**
 * An endpoint's credentials beyond static headers (docs/design.md §14.4): OAuth2 client
 * credentials (`auth`, its secret read as `********`) and the client certificate for mutual
 * TLS (read as its subject and expiry). Shown on the endpoint's row, with a warning from 14
 * days before the certificate expires, and edited in the controls dialog.
 */
import { ApiError } from './api.js';
import { h } from './dom.js';
import { badge } from './widgets.js';

/** A certificate this close to its expiry is flagged, ms. */
const EXPIRY_WARNING_MS = 14 * 24 * 3600_000;
const DAY_MS = 24 * 3600_000;
const MASKED = '********';

/**
 * The lines the endpoint's row shows about its credentials; none without any.
 *
 * @param {any} endpoint
 * @param {number} [now] ms since the epoch
 */
export function credentialsSummary(endpoint, now = Date.now()) {
  const lines = [];
  const auth = endpoint.auth;
  if (auth) lines.push(h('div', { class: 'muted small auth' }, `OAuth2 · client ${auth.client_id} · token from ${hostOf(auth.token_url)}`));
  const certificate = endpoint.client_certificate;
  if (certificate) {
    const notAfter = certificate.not_after ? new Date(certificate.not_after).getTime() : NaN;
    const left = notAfter - now;
    let warning = null;
    if (Number.isNaN(left)) warning = badge('unreadable', 'bad');
    else if (left <= 0) warning = badge('certificate expired', 'bad');
    else if (left <= EXPIRY_WARNING_MS) warning = badge(`certificate expires in ${Math.max(1, Math.floor(left / DAY_MS))} days`, 'warn');
    const until = Number.isNaN(notAfter) ? '' : ` · until ${new Date(notAfter).toISOString().slice(0, 10)}`;
    lines.push(h('div', { class: 'small client-certificate' }, `mTLS · ${certificate.subject}${until} `, warning));
  }
  return lines;
}

/**
 * Fills the controls dialog's credential fields from the endpoint.
 *
 * @param {HTMLDialogElement} dialog
 * @param {any} endpoint
 */
export function fillCredentials(dialog, endpoint) {
  const auth = endpoint.auth ?? {};
  for (const name of ['token_url', 'client_id', 'client_secret', 'scope', 'audience']) field(dialog, `auth_${name}`).value = auth[name] ?? '';
  field(dialog, 'client_cert').value = '';
  field(dialog, 'client_key').value = '';
  /** @type {HTMLInputElement} */ (field(dialog, 'remove_client_certificate')).checked = false;
  const certificate = endpoint.client_certificate;
  const current = /** @type {HTMLElement} */ (dialog.querySelector('.current-certificate'));
  current.textContent = certificate ? `Now: ${certificate.subject}, until ${certificate.not_after ?? 'unknown'}.` : 'None now.';
}

/**
 * The PATCH fields the dialog's credential inputs ask for: `auth` (null to remove; left out when
 * the endpoint had none and none is given) and `client_certificate` (left out to keep it; an
 * empty key keeps the stored one).
 *
 * @param {HTMLDialogElement} dialog
 * @param {any} endpoint
 * @returns {Record<string, unknown>}
 * @throws {ApiError} for a certificate given without a key on an endpoint with none
 */
export function readCredentials(dialog, endpoint) {
  /** @type {Record<string, unknown>} */
  const changes = {};
  const value = (/** @type {string} */ name) => field(dialog, name).value.trim();
  const tokenUrl = value('auth_token_url');
  if (tokenUrl === '') {
    if (endpoint.auth) changes.auth = null;
  } else {
    /** @type {Record<string, string>} */
    const auth = { type: 'oauth2_client_credentials', token_url: tokenUrl, client_id: value('auth_client_id'), client_secret: value('auth_client_secret') };
    for (const name of ['scope', 'audience']) if (value(`auth_${name}`) !== '') auth[name] = value(`auth_${name}`);
    changes.auth = auth;
  }
  if (/** @type {HTMLInputElement} */ (field(dialog, 'remove_client_certificate')).checked) {
    changes.client_certificate = null;
  } else if (value('client_cert') !== '') {
    if (value('client_key') === '' && !endpoint.client_certificate) throw new ApiError(0, 'Paste the certificate\'s private key too.');
    changes.client_certificate = { cert: value('client_cert'), key: value('client_key') || MASKED };
  }
  return changes;
}

/** @param {HTMLDialogElement} dialog @param {string} name */
function field(dialog, name) {
  return /** @type {HTMLInputElement | HTMLTextAreaElement} */ (dialog.querySelector(`[name="${name}"]`));
}

/** @param {string} url */
function hostOf(url) {
  try {
    return new URL(url).host;
  } catch {
    return url;
  }
}
