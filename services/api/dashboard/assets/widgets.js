// @ts-check
/**
 * Small pieces the views share: buttons, badges, the pager and value formats.
 */
import { h, replace } from './dom.js';

const STATUSES = new Set(['pending', 'delivering', 'succeeded', 'failed']);

/**
 * @param {string} label
 * @param {() => unknown} onClick
 * @param {string} [tone] an extra class: primary or danger
 * @returns {HTMLButtonElement}
 */
export function button(label, onClick, tone) {
  // stopPropagation: a button inside a clickable table row does only its own thing.
  const click = (/** @type {Event} */ event) => (event.stopPropagation(), onClick());
  return /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: tone, on: { click } }, label));
}

/** @param {string} text @param {'good' | 'bad' | 'warn' | 'neutral'} tone */
export function badge(text, tone) {
  return h('span', { class: `badge ${tone}` }, text);
}

/** @param {unknown} status a delivery status (docs/design.md §3) */
export function statusBadge(status) {
  const known = typeof status === 'string' && STATUSES.has(status) ? status : 'unknown';
  const tone = known === 'succeeded' ? 'good' : known === 'failed' ? 'bad' : known === 'unknown' ? 'neutral' : 'warn';
  return badge(known, tone);
}

/**
 * Cursor paging state: the cursor of each page shown so far (`null` for the first); the
 * last one is the current page's.
 *
 * @typedef {{cursors: (string | null)[], next: string | null}} Pages
 */

/** @returns {Pages} */
export function firstPage() {
  return { cursors: [null], next: null };
}

/** @param {Pages} pages */
export function currentCursor(pages) {
  return pages.cursors[pages.cursors.length - 1];
}

/**
 * Newer / Older buttons over an API list's `next_cursor` (docs/design.md §11.1); newer pages are the
 * cursors already visited.
 *
 * @param {HTMLElement} container
 * @param {Pages} pages
 * @param {() => Promise<void>} load loads the current page
 */
export function renderPager(container, pages, load) {
  if (pages.cursors.length <= 1 && !pages.next) return replace(container);
  const newer = button('‹ Newer', () => {
    pages.cursors.pop();
    return load();
  });
  newer.disabled = pages.cursors.length <= 1;
  const older = button('Older ›', () => {
    if (pages.next) pages.cursors.push(pages.next);
    return load();
  });
  older.disabled = !pages.next;
  replace(container, newer, h('span', { class: 'muted' }, `Page ${pages.cursors.length}`), older);
}

/** @param {number} ms */
export function formatMs(ms) {
  return ms >= 1000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms)} ms`;
}

/** @param {number} rate a fraction, 0..1 */
export function formatPercent(rate) {
  const percent = rate * 100;
  return `${Number.isInteger(percent) ? percent : percent.toFixed(1)}%`;
}

/**
 * A URL without its scheme, for narrow cells (give the full one as the tooltip).
 *
 * @param {unknown} url
 */
export function shortUrl(url) {
  const text = String(url);
  try {
    const parsed = new URL(text);
    return parsed.host + parsed.pathname;
  } catch {
    return text;
  }
}
