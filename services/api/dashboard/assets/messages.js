// @ts-check
/**
 * The page's notices and errors: one banner for the outcome of an action, and inline errors
 * in place of a part of the page that could not load. Errors show the API's own message
 * with its HTTP status.
 */
import { ApiError } from './api.js';
import { byId, h } from './dom.js';

/** @param {unknown} error */
function describe(error) {
  if (error instanceof ApiError) return error.status ? `${error.message} (HTTP ${error.status})` : error.message;
  return error instanceof Error ? error.message : String(error);
}

/** @param {unknown} error an ApiError, an Error or a message */
export function showError(error) {
  byId('error-text').textContent = describe(error);
  byId('error').hidden = false;
}

/** @param {string} text */
export function showNotice(text) {
  const notice = byId('notice');
  notice.textContent = text;
  notice.hidden = false;
}

export function clearMessages() {
  byId('error').hidden = true;
  byId('notice').hidden = true;
}

/**
 * An error to put in place of what failed to load.
 *
 * @param {unknown} error
 */
export function inlineError(error) {
  return h('p', { class: 'inline-error', role: 'alert' }, describe(error));
}
