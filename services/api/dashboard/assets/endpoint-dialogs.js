// @ts-check
/**
 * The endpoint actions that ask something first: recover failed deliveries since a time
 * (`POST /api/v1/endpoints/{id}/recover`), replay past events it never got
 * (`POST /api/v1/endpoints/{id}/replay`), rotate the signing secret
 * (`POST /api/v1/endpoints/{id}/rotate-secret`), whose new secret is shown once, and edit the
 * endpoint's controls (`PATCH /api/v1/endpoints/{id}`: headers, ordering, rate limit, filter,
 * OAuth2 credentials and client certificate).
 */
import { ApiError } from './api.js';
import { byId, isoToLocalInput, localInputToIso, replace } from './dom.js';
import { fillCredentials, readCredentials } from './endpoint-credentials.js';
import { clearMessages, inlineError, showNotice } from './messages.js';
import { api } from './session.js';

const DAY_MS = 24 * 3600_000;

/**
 * @param {any} endpoint
 * @param {() => Promise<void>} afterRecover reloads what the recovery changed
 */
export function openRecover(endpoint, afterRecover) {
  openSince('recover-dialog', endpoint, 'recover', DAY_MS, afterRecover, (count) =>
    count === 0
      ? `No failed deliveries to endpoint #${endpoint.id} since then.`
      : `${count} failed ${count === 1 ? 'delivery' : 'deliveries'} to endpoint #${endpoint.id} queued again.`,
  );
}

/**
 * @param {any} endpoint
 * @param {() => Promise<void>} afterReplay reloads the deliveries the replay made
 */
export function openReplay(endpoint, afterReplay) {
  openSince('replay-dialog', endpoint, 'replay', DAY_MS, afterReplay, (count) =>
    count === 0
      ? `Endpoint #${endpoint.id} already has every event since then.`
      : `${count} past ${count === 1 ? 'event' : 'events'} queued for endpoint #${endpoint.id}, oldest first.`,
  );
}

/**
 * A dialog that asks for a time and posts `{since}` to `/endpoints/{id}/<action>`, whose
 * answer is `{count}`.
 *
 * @param {string} dialogId
 * @param {any} endpoint
 * @param {'recover' | 'replay'} action
 * @param {number} backMs how far back the time starts, ms
 * @param {() => Promise<void>} after
 * @param {(count: number) => string} notice
 */
function openSince(dialogId, endpoint, action, backMs, after, notice) {
  clearMessages();
  const dialog = /** @type {HTMLDialogElement} */ (byId(dialogId));
  const since = /** @type {HTMLInputElement} */ (dialog.querySelector('[name="since"]'));
  since.value = isoToLocalInput(new Date(Date.now() - backMs));
  setTarget(dialog, endpoint);
  onConfirm(dialog, async () => {
    const iso = localInputToIso(since.value);
    if (!iso) throw new ApiError(0, `Pick the time to ${action} from.`);
    const { count } = await api('POST', `/endpoints/${encodeURIComponent(endpoint.id)}/${action}`, { since: iso });
    dialog.close();
    showNotice(notice(count));
    await after();
  });
  dialog.showModal();
}

/**
 * @param {any} endpoint
 * @param {() => Promise<void>} afterSave reloads the endpoints
 */
export function openControls(endpoint, afterSave) {
  clearMessages();
  const dialog = /** @type {HTMLDialogElement} */ (byId('controls-dialog'));
  const headers = /** @type {HTMLTextAreaElement} */ (dialog.querySelector('[name="headers"]'));
  const ordering = /** @type {HTMLSelectElement} */ (dialog.querySelector('[name="ordering"]'));
  const rate = /** @type {HTMLInputElement} */ (dialog.querySelector('[name="rate_limit_per_s"]'));
  const filter = /** @type {HTMLTextAreaElement} */ (dialog.querySelector('[name="filter"]'));
  headers.value = Object.entries(endpoint.headers ?? {})
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, value]) => `${name}: ${value}`)
    .join('\n');
  ordering.value = endpoint.ordering ?? 'unordered';
  rate.value = endpoint.rate_limit_per_s == null ? '' : String(endpoint.rate_limit_per_s);
  filter.value = endpoint.filter == null ? '' : JSON.stringify(endpoint.filter);
  fillCredentials(dialog, endpoint);
  setTarget(dialog, endpoint);
  onConfirm(dialog, async () => {
    /** @type {Record<string, string>} */
    const map = {};
    for (const line of headers.value.split('\n')) {
      if (line.trim() === '') continue;
      const colon = line.indexOf(':');
      if (colon <= 0) throw new ApiError(0, `Write each header as "Name: value": ${line}`);
      map[line.slice(0, colon).trim()] = line.slice(colon + 1).trim();
    }
    const limit = rate.value.trim() === '' ? null : Number(rate.value);
    let match = null;
    if (filter.value.trim() !== '') {
      try {
        match = JSON.parse(filter.value);
      } catch {
        throw new ApiError(0, 'The filter is not valid JSON.');
      }
    }
    const credentials = readCredentials(dialog, endpoint);
    await api('PATCH', `/endpoints/${encodeURIComponent(endpoint.id)}`, { headers: map, ordering: ordering.value, rate_limit_per_s: limit, filter: match, ...credentials });
    dialog.close();
    // Said once the list holds the saved endpoint, so what is opened next shows the change.
    await afterSave();
    showNotice(`Endpoint #${endpoint.id} saved.`);
  });
  dialog.showModal();
}

/** @param {any} endpoint */
export function openRotate(endpoint) {
  clearMessages();
  const dialog = /** @type {HTMLDialogElement} */ (byId('rotate-dialog'));
  const overlap = /** @type {HTMLInputElement} */ (dialog.querySelector('[name="overlap_hours"]'));
  const ask = /** @type {HTMLElement} */ (dialog.querySelector('.dialog-form'));
  const once = /** @type {HTMLElement} */ (dialog.querySelector('.secret-once'));
  const secret = /** @type {HTMLElement} */ (dialog.querySelector('.secret'));
  overlap.value = '24';
  ask.hidden = false;
  once.hidden = true;
  secret.textContent = '';
  setTarget(dialog, endpoint);
  onConfirm(dialog, async () => {
    const hours = Number(overlap.value);
    if (!Number.isInteger(hours) || hours < 0 || hours > 168) throw new ApiError(0, 'The overlap is 0 to 168 whole hours.');
    const result = await api('POST', `/endpoints/${encodeURIComponent(endpoint.id)}/rotate-secret`, { overlap_hours: hours });
    secret.textContent = String(result.secret);
    ask.hidden = true;
    once.hidden = false;
  });
  /** @type {HTMLButtonElement} */ (dialog.querySelector('[data-copy]')).onclick = () => copySecret(secret);
  // The secret is shown once: it leaves the page with the dialog.
  dialog.onclose = () => {
    secret.textContent = '';
  };
  dialog.showModal();
}

/** @param {HTMLElement} secret */
async function copySecret(secret) {
  try {
    await navigator.clipboard.writeText(secret.textContent ?? '');
    showNotice('Secret copied.');
  } catch {
    // Outside a secure context there is no clipboard API: select it for a manual copy.
    const range = document.createRange();
    range.selectNodeContents(secret);
    window.getSelection()?.removeAllRanges();
    window.getSelection()?.addRange(range);
  }
}

/** @param {HTMLDialogElement} dialog @param {any} endpoint */
function setTarget(dialog, endpoint) {
  replace(/** @type {HTMLElement} */ (dialog.querySelector('.dialog-target')), `Endpoint #${endpoint.id}: ${endpoint.url}`);
}

/**
 * Wires a dialog's buttons for one opening: Cancel and Done close it; the confirm button runs
 * `action`, showing its error inside the dialog, which stays open.
 *
 * @param {HTMLDialogElement} dialog
 * @param {() => Promise<void>} action
 */
function onConfirm(dialog, action) {
  dialog.querySelector('.inline-error')?.remove();
  for (const close of dialog.querySelectorAll('[data-close]')) /** @type {HTMLButtonElement} */ (close).onclick = () => dialog.close();
  const confirm = /** @type {HTMLButtonElement} */ (dialog.querySelector('[data-confirm]'));
  confirm.onclick = async () => {
    dialog.querySelector('.inline-error')?.remove();
    confirm.disabled = true;
    try {
      await action();
    } catch (error) {
      confirm.closest('.dialog-buttons')?.before(inlineError(error));
    } finally {
      confirm.disabled = false;
    }
  };
}
