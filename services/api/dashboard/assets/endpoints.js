// @ts-check
/**
 * Endpoints: the paged list (`GET /api/v1/endpoints`) with each one's health
 * (`GET /api/v1/endpoints/{id}/stats`) and its actions: deliveries, test, recover, replay, rotate
 * secret, controls (headers, ordering, rate limit, filter, credentials), charts, enable and
 * disable. A row shows the endpoint's OAuth2 client and client certificate, and warns from 14
 * days before the certificate expires.
 */
import { query } from './api.js';
import { showEndpointCharts } from './charts.js';
import { byId, h, replace, time } from './dom.js';
import { filterByEndpoint, loadDeliveries, openDelivery } from './deliveries.js';
import { credentialsSummary } from './endpoint-credentials.js';
import { openControls, openRecover, openReplay, openRotate } from './endpoint-dialogs.js';
import { clearMessages, inlineError, showError, showNotice } from './messages.js';
import { api, canChange } from './session.js';
import { badge, button, currentCursor, firstPage, formatMs, formatPercent, renderPager } from './widgets.js';

const PAGE_SIZE = 20;
const CIRCUITS = new Set(['closed', 'open', 'half_open']);

let pages = firstPage();
/** Increments per load, so an answer overtaken by a later load is dropped. */
let loads = 0;

/** Wires the refresh button; call once. */
export function initEndpoints() {
  byId('endpoints-refresh').addEventListener('click', () => loadEndpoints());
}

/** Back to the first page, with nothing shown (sign-in, sign-out). */
export function resetEndpoints() {
  pages = firstPage();
  replace(byId('endpoints'));
}

/** Loads and draws the current page, each row with its health. */
export async function loadEndpoints() {
  const container = byId('endpoints');
  const load = ++loads;
  // A refresh keeps the current table until the new one is ready, so nothing jumps.
  if (!container.querySelector('table')) replace(container, h('p', { class: 'muted' }, 'Loading endpoints…'));
  let page;
  try {
    page = await api('GET', `/endpoints${query({ limit: PAGE_SIZE, cursor: currentCursor(pages) })}`);
  } catch (error) {
    if (load !== loads) return;
    replace(container, inlineError(error));
    replace(byId('endpoints-pager'));
    return;
  }
  if (load !== loads) return;
  const endpoints = Array.isArray(page?.data) ? page.data : [];
  pages.next = page?.next_cursor ?? null;
  fillEndpointFilter(endpoints);
  renderPager(byId('endpoints-pager'), pages, loadEndpoints);
  if (endpoints.length === 0) {
    const empty =
      pages.cursors.length > 1
        ? 'No more endpoints.'
        : 'No endpoints yet. Add one with POST /api/v1/endpoints; its deliveries and health then show here.';
    replace(container, h('p', { class: 'empty' }, empty));
    return;
  }
  const rows = await Promise.all(endpoints.map(async (/** @type {any} */ endpoint) => endpointRow(endpoint, await healthOf(endpoint))));
  if (load !== loads) return;
  replace(
    container,
    h(
      'table',
      { class: 'endpoints' },
      h('colgroup', {}, ['endpoint', 'state', 'health', 'actions'].map((name) => h('col', { class: `col-${name}` }))),
      h('thead', {}, h('tr', {}, ['Endpoint', 'State', 'Health, last 24 h', 'Actions'].map((label) => h('th', {}, label)))),
      h('tbody', {}, rows),
    ),
  );
}

/** @param {any} endpoint @param {HTMLElement} health */
function endpointRow(endpoint, health) {
  const events = Array.isArray(endpoint.events) && endpoint.events.length ? endpoint.events.join(', ') : 'all events';
  const owner = endpoint.user_id == null ? 'operator endpoint' : `user ${endpoint.user_id}`;
  return h(
    'tr',
    { 'data-endpoint-id': endpoint.id },
    h(
      'td',
      { class: 'endpoint' },
      h('div', { class: 'url' }, String(endpoint.url)),
      endpoint.description ? h('div', { class: 'description' }, String(endpoint.description)) : null,
      h('div', { class: 'muted small' }, `#${endpoint.id} · ${events} · ${owner}`),
      endpoint.signature_scheme === 'ed25519'
        ? h('div', { class: 'muted small public-key', title: 'Standard Webhooks v1a: the receiver verifies with this public key' }, `ed25519 · ${endpoint.public_key}`)
        : null,
      credentialsSummary(endpoint),
    ),
    h(
      'td',
      {},
      endpoint.active ? badge('active', 'good') : badge('disabled', 'bad'),
      endpoint.disabled_reason ? h('div', { class: 'small' }, String(endpoint.disabled_reason)) : null,
    ),
    h('td', { class: 'health' }, health),
    h(
      'td',
      {},
      h(
        'div',
        { class: 'actions' },
        button('Deliveries', () => filterByEndpoint(endpoint.id)),
        button('Charts', () => showEndpointCharts(endpoint)),
        canChange() && [
          button('Send test', () => sendTest(endpoint)),
          button('Recover…', () => openRecover(endpoint, loadDeliveries)),
          button('Replay…', () => openReplay(endpoint, loadDeliveries)),
          button('Rotate secret…', () => openRotate(endpoint)),
          button('Controls…', () => openControls(endpoint, loadEndpoints)),
          endpoint.active
            ? button('Disable', () => setActive(endpoint, false), 'danger')
            : button('Enable', () => setActive(endpoint, true)),
        ],
      ),
    ),
  );
}

/** @param {any} endpoint */
async function healthOf(endpoint) {
  try {
    return healthView(await api('GET', `/endpoints/${encodeURIComponent(endpoint.id)}/stats`));
  } catch (error) {
    return inlineError(error);
  }
}

/** @param {any} stats */
function healthView(stats) {
  const circuit = CIRCUITS.has(stats.circuit) ? stats.circuit : 'unknown';
  const circuitTone = circuit === 'closed' ? 'good' : circuit === 'open' ? 'bad' : 'warn';
  const rate = typeof stats.success_rate_24h === 'number' ? stats.success_rate_24h : null;
  const rateTone = rate === null ? 'muted' : rate >= 0.95 ? 'good-text' : rate >= 0.5 ? 'warn-text' : 'bad-text';
  const latency = stats.p50_ms == null ? '—' : `p50 ${formatMs(stats.p50_ms)} · p95 ${formatMs(stats.p95_ms)}`;
  return h(
    'div',
    { class: 'health-grid' },
    h('span', { class: 'label' }, 'Success'),
    h('span', { class: rateTone }, rate === null ? 'no attempts' : `${formatPercent(rate)} of ${stats.attempts_24h}`),
    h('span', { class: 'label' }, 'Latency'),
    h('span', {}, latency),
    h('span', { class: 'label' }, 'Circuit'),
    h('span', {}, badge(circuit.replace('_', '-'), circuitTone)),
    h('span', { class: 'label' }, 'Last success'),
    time(stats.last_success_at, { compact: true }),
    h('span', { class: 'label' }, 'Last failure'),
    time(stats.last_failure_at, { compact: true }),
    episodeView(stats),
  );
}

/**
 * The open failure episode (docs/design.md §6.6): since when the endpoint fails and how many
 * attempts failed in a row; nothing while none is open.
 * @param {any} stats
 */
function episodeView(stats) {
  if (!stats.failing_since) return null;
  const failures = Number(stats.consecutive_failures);
  return [
    h('span', { class: 'label' }, 'Failing since'),
    h(
      'span',
      { class: 'episode bad-text' },
      time(stats.failing_since, { compact: true }),
      ` · ${failures} failed attempt${failures === 1 ? '' : 's'} in a row`,
    ),
  ];
}

/** The deliveries filter offers the endpoints of the page shown. @param {any[]} endpoints */
function fillEndpointFilter(endpoints) {
  const select = /** @type {HTMLSelectElement} */ (byId('filters').querySelector('[name="endpoint_id"]'));
  const chosen = select.value;
  replace(
    select,
    h('option', { value: '' }, 'any'),
    endpoints.map((endpoint) => h('option', { value: endpoint.id }, `#${endpoint.id} ${endpoint.url}`)),
  );
  if (chosen && !endpoints.some((endpoint) => String(endpoint.id) === chosen)) {
    select.append(h('option', { value: chosen }, `#${chosen}`));
  }
  select.value = chosen;
}

/** @param {any} endpoint */
async function sendTest(endpoint) {
  clearMessages();
  try {
    const { id } = await api('POST', `/endpoints/${encodeURIComponent(endpoint.id)}/test`);
    showNotice(`Test delivery ${id} queued for endpoint #${endpoint.id}.`);
    await loadDeliveries();
    await openDelivery(id, { watchForAttemptsAbove: 0 });
  } catch (error) {
    showError(error);
  }
}

/** @param {any} endpoint @param {boolean} active */
async function setActive(endpoint, active) {
  clearMessages();
  if (!active && !window.confirm(`Disable endpoint #${endpoint.id}? It receives nothing until enabled again.`)) return;
  try {
    await api('PATCH', `/endpoints/${encodeURIComponent(endpoint.id)}`, { active });
    showNotice(`Endpoint #${endpoint.id} ${active ? 'enabled' : 'disabled'}.`);
  } catch (error) {
    showError(error);
  }
  await loadEndpoints();
}
