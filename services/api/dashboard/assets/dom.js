// @ts-check
/**
 * Element building for the dashboard. Everything the API returns is attacker-influenced
 * (endpoint URLs and descriptions, response excerpts), so it only ever becomes text nodes or
 * attribute values set through the DOM: nothing here parses HTML.
 */

/**
 * @typedef {Node | string | number | null | undefined | false} Child
 * @typedef {{class?: string, text?: string, on?: Record<string, (event: any) => void>, [attribute: string]: unknown}} Props
 */

/**
 * `h('td', {class: 'num'}, 'text', node)`: an element with attributes, listeners and children.
 * Strings and numbers become text nodes; null, undefined and false are skipped.
 *
 * @param {string} tag
 * @param {Props} [props]
 * @param {...(Child | Child[])} children
 * @returns {HTMLElement}
 */
export function h(tag, props = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === 'class') element.className = String(value);
    else if (name === 'text') element.textContent = String(value);
    else if (name === 'on') {
      for (const [type, listener] of Object.entries(/** @type {Record<string, EventListener>} */ (value))) {
        element.addEventListener(type, listener);
      }
    } else element.setAttribute(name, value === true ? '' : String(value));
  }
  append(element, children);
  return element;
}

/**
 * @param {Element} parent
 * @param {(Child | Child[])[]} children
 */
function append(parent, children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    parent.append(typeof child === 'number' ? String(child) : child);
  }
}

/**
 * Replaces an element's children.
 *
 * @param {Element} parent
 * @param {...(Child | Child[])} children
 */
export function replace(parent, ...children) {
  parent.replaceChildren();
  append(parent, children);
}

/** @param {string} id */
export function byId(id) {
  const element = document.getElementById(id);
  if (!element) throw new Error(`the page has no #${id}`);
  return element;
}

const TIME_FORMAT = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
const COMPACT_TIME_FORMAT = new Intl.DateTimeFormat(undefined, {
  month: 'short',
  day: 'numeric',
  hour: '2-digit',
  minute: '2-digit',
  second: '2-digit',
});

/**
 * A `<time>` in the browser's local time zone, with the exact instant (UTC) as its tooltip.
 *
 * @param {string | null | undefined} iso an ISO 8601 instant from the API
 * @param {{compact?: boolean}} [options] compact: without the year, for table rows
 */
export function time(iso, options = {}) {
  if (!iso) return h('span', { class: 'muted' }, '—');
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return h('span', {}, iso);
  const format = options.compact ? COMPACT_TIME_FORMAT : TIME_FORMAT;
  return h('time', { datetime: date.toISOString(), title: date.toISOString() }, format.format(date));
}

/** The browser's time zone name, e.g. `Europe/Paris`, for saying which zone times are in. */
export function localZone() {
  return Intl.DateTimeFormat().resolvedOptions().timeZone || 'local time';
}

/**
 * A `datetime-local` input's value (the browser's local time) as an ISO 8601 instant.
 *
 * @param {string} value
 * @returns {string} empty when the input is empty or invalid
 */
export function localInputToIso(value) {
  if (!value) return '';
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? '' : date.toISOString();
}

/**
 * A `datetime-local` value for an instant, in the browser's local time, to the second.
 *
 * @param {Date} date
 */
export function isoToLocalInput(date) {
  const local = new Date(date.getTime() - date.getTimezoneOffset() * 60_000);
  return local.toISOString().slice(0, 19);
}
