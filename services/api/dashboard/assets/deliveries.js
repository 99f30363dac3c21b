// @ts-check
/**
 * Deliveries: the filtered, paged list (`GET /api/v1/webhooks`) and one delivery with its
 * attempts (`GET /api/v1/webhooks/{id}`), with Redeliver.
 */
import { query } from './api.js';
import { byId, h, localInputToIso, replace, time } from './dom.js';
import { clearMessages, inlineError, showError, showNotice } from './messages.js';
import { api, canChange } from './session.js';
import { badge, button, currentCursor, firstPage, renderPager, shortUrl, statusBadge } from './widgets.js';

const PAGE_SIZE = 20;
// After a redeliver or a test, how long and how often the page looks for the new attempt, ms.
const WATCH_FOR_MS = 30_000;
const WATCH_EVERY_MS = 1_000;
/** Dispatched on `document` once a watched delivery has its new attempt. */
export const ATTEMPT_LANDED = 'dashboard:attempt-landed';

let pages = firstPage();
/** @type {Record<string, string>} */
let filters = {};
/** @type {string | null} */
let selected = null;
/** Increments whenever the shown delivery changes, so a stale poll stops drawing. */
let shown = 0;
/** Increments per list load, so an answer overtaken by a later load is dropped. */
let loads = 0;

/** Wires the filter form and the refresh button; call once. */
export function initDeliveries() {
  const form = /** @type {HTMLFormElement} */ (byId('filters'));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    applyFilters();
  });
  // After the browser has cleared the fields.
  form.addEventListener('reset', () => setTimeout(applyFilters));
  byId('deliveries-refresh').addEventListener('click', () => loadDeliveries());
}

/** Forgets the shown delivery and the paging (sign-in, sign-out). */
export function resetDeliveries() {
  pages = firstPage();
  selected = null;
  shown += 1;
  replace(byId('delivery'), h('p', { class: 'empty' }, 'Pick a delivery to see its attempts.'));
}

/** Shows the deliveries to one endpoint. @param {string | number} endpointId */
export function filterByEndpoint(endpointId) {
  const form = /** @type {HTMLFormElement} */ (byId('filters'));
  /** @type {HTMLSelectElement} */ (form.elements.namedItem('endpoint_id')).value = String(endpointId);
  byId('deliveries-title').scrollIntoView({ behavior: 'smooth', block: 'start' });
  return applyFilters();
}

function applyFilters() {
  const data = new FormData(/** @type {HTMLFormElement} */ (byId('filters')));
  filters = {
    status: String(data.get('status') ?? ''),
    event: String(data.get('event') ?? '').trim(),
    endpoint_id: String(data.get('endpoint_id') ?? ''),
    since: localInputToIso(String(data.get('since') ?? '')),
    until: localInputToIso(String(data.get('until') ?? '')),
  };
  pages = firstPage();
  return loadDeliveries();
}

/** Loads and draws the current page of the list. */
export async function loadDeliveries() {
  const container = byId('deliveries');
  const load = ++loads;
  let page;
  try {
    page = await api('GET', `/webhooks${query({ ...filters, limit: PAGE_SIZE, cursor: currentCursor(pages) })}`);
  } catch (error) {
    if (load !== loads) return;
    replace(container, inlineError(error));
    replace(byId('deliveries-pager'));
    return;
  }
  if (load !== loads) return;
  const deliveries = Array.isArray(page?.data) ? page.data : [];
  pages.next = page?.next_cursor ?? null;
  renderPager(byId('deliveries-pager'), pages, loadDeliveries);
  if (deliveries.length === 0) {
    const empty =
      pages.cursors.length > 1
        ? 'No more deliveries.'
        : Object.values(filters).some(Boolean)
          ? 'No deliveries match these filters.'
          : 'No deliveries yet. They appear here when an event goes to an endpoint.';
    replace(container, h('p', { class: 'empty' }, empty));
    return;
  }
  const columns = ['created', 'event', 'endpoint', 'status', 'attempts', 'result'];
  replace(
    container,
    h(
      'table',
      { class: 'deliveries' },
      h('colgroup', {}, columns.map((name) => h('col', { class: `col-${name}` }))),
      h(
        'thead',
        {},
        h('tr', {}, ['Created', 'Event', 'Endpoint', 'Status'].map((label) => h('th', {}, label)), h('th', { class: 'num' }, 'Tries'), h('th', {}, 'Result')),
      ),
      h('tbody', {}, deliveries.map(deliveryRow)),
    ),
  );
}

/** @param {any} delivery */
function deliveryRow(delivery) {
  const open = () => openDelivery(String(delivery.id));
  const result =
    delivery.last_status_code != null
      ? `HTTP ${delivery.last_status_code}`
      : delivery.last_error
        ? String(delivery.last_error)
        : h('span', { class: 'muted' }, '—');
  return h(
    'tr',
    {
      'data-delivery-id': delivery.id,
      class: delivery.id === selected ? 'selected' : undefined,
      tabindex: 0,
      on: { click: open, keydown: (/** @type {KeyboardEvent} */ event) => event.key === 'Enter' && open() },
    },
    h('td', { class: 'clip' }, time(delivery.created_at, { compact: true })),
    h('td', { class: 'clip', title: String(delivery.event) }, h('code', {}, String(delivery.event))),
    h('td', { class: 'clip', title: String(delivery.url) }, endpointLabel(delivery), ' ', h('span', { class: 'muted' }, shortUrl(delivery.url))),
    h('td', {}, statusBadge(delivery.status)),
    h('td', { class: 'num' }, Number(delivery.attempt_count ?? 0)),
    h('td', { class: 'clip', title: delivery.last_error == null ? undefined : String(delivery.last_error) }, result),
  );
}

/**
 * Shows one delivery with its attempts. With `watchForAttemptsAbove`, keeps reloading it
 * until it has more attempts than that (a redelivery or test landed) or WATCH_FOR_MS pass,
 * then refreshes the list and announces ATTEMPT_LANDED.
 *
 * @param {string} id
 * @param {{watchForAttemptsAbove?: number}} [options]
 */
export async function openDelivery(id, options = {}) {
  selected = id;
  const view = ++shown;
  for (const row of byId('deliveries').querySelectorAll('tr[data-delivery-id]')) {
    row.classList.toggle('selected', row.getAttribute('data-delivery-id') === id);
  }
  const container = byId('delivery');
  const watching = options.watchForAttemptsAbove;
  const deadline = Date.now() + WATCH_FOR_MS;
  for (;;) {
    let delivery;
    try {
      delivery = await api('GET', `/webhooks/${encodeURIComponent(id)}`);
    } catch (error) {
      if (view === shown) replace(container, inlineError(error));
      return;
    }
    if (view !== shown) return;
    const attempts = Array.isArray(delivery.attempts) ? delivery.attempts : [];
    const waiting = watching !== undefined && attempts.length <= watching && Date.now() < deadline;
    replace(container, deliveryView(delivery, attempts, waiting));
    if (!waiting) {
      if (watching !== undefined) {
        document.dispatchEvent(new CustomEvent(ATTEMPT_LANDED));
        await loadDeliveries();
      }
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, WATCH_EVERY_MS));
    if (view !== shown) return;
  }
}

/** @param {any} delivery @param {any[]} attempts @param {boolean} waiting */
function deliveryView(delivery, attempts, waiting) {
  const redeliver = canChange() && button('Redeliver', () => redeliverDelivery(delivery, attempts.length), 'primary');
  if (redeliver) redeliver.disabled = waiting;
  return h(
    'div',
    { 'data-delivery-id': delivery.id },
    h('div', { class: 'detail-head' }, h('code', { class: 'delivery-id' }, String(delivery.id)), statusBadge(delivery.status), redeliver),
    h(
      'dl',
      { class: 'facts' },
      fact('Event', h('code', {}, String(delivery.event))),
      fact('Endpoint', endpointLabel(delivery)),
      fact('URL', h('span', { class: 'break' }, String(delivery.url))),
      fact('Created', time(delivery.created_at)),
      fact('Delivered', time(delivery.delivered_at)),
      fact('Next attempt', time(delivery.next_attempt_at)),
      fact('Last result', lastResult(delivery.last_status_code, delivery.last_error)),
    ),
    h('h3', {}, `Attempts (${attempts.length})`),
    waiting ? h('p', { class: 'muted', role: 'status' }, 'Waiting for the new attempt…') : null,
    attempts.length === 0
      ? h('p', { class: 'empty' }, 'No attempts yet: the delivery is queued.')
      : h('ol', { class: 'attempts', reversed: true }, [...attempts].reverse().map(attemptView)),
  );
}

/** @param {any} attempt */
function attemptView(attempt) {
  const code = attempt.status_code;
  const ok = typeof code === 'number' && code >= 200 && code < 300;
  return h(
    'li',
    { class: 'attempt', 'data-attempt-number': attempt.number },
    h(
      'div',
      { class: 'attempt-head' },
      h('strong', {}, `#${attempt.number}`),
      code != null ? badge(`HTTP ${code}`, ok ? 'good' : 'bad') : badge('no response', 'bad'),
      h('span', { class: 'muted' }, attempt.duration_ms == null ? '' : `${attempt.duration_ms} ms`),
      time(attempt.created_at),
    ),
    attempt.error ? h('div', { class: 'attempt-error' }, String(attempt.error)) : null,
    attempt.response_excerpt
      ? h('pre', { class: 'excerpt' }, String(attempt.response_excerpt))
      : h('div', { class: 'muted small' }, 'Empty response body.'),
  );
}

/** @param {any} delivery @param {number} attemptsBefore */
async function redeliverDelivery(delivery, attemptsBefore) {
  clearMessages();
  try {
    await api('POST', `/webhooks/${encodeURIComponent(delivery.id)}/redeliver`);
  } catch (error) {
    showError(error);
    return;
  }
  showNotice(`Redelivery of ${delivery.id} queued: one new attempt, same webhook-id.`);
  await openDelivery(String(delivery.id), { watchForAttemptsAbove: attemptsBefore });
}

/** @param {any} delivery */
function endpointLabel(delivery) {
  return delivery.endpoint_id == null ? 'ad hoc' : `#${delivery.endpoint_id}`;
}

/** @param {unknown} statusCode @param {unknown} error */
function lastResult(statusCode, error) {
  if (statusCode == null && !error) return h('span', { class: 'muted' }, '—');
  const parts = [statusCode == null ? '' : `HTTP ${statusCode}`, error ? String(error) : ''].filter(Boolean);
  return h('span', { class: 'last-result' }, parts.join(' · '));
}

/** @param {string} label @param {import('./dom.js').Child} value */
function fact(label, value) {
  return [h('dt', {}, label), h('dd', {}, value)];
}
