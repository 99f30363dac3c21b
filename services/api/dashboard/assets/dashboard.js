// @ts-check
/**
 * The webhooks dashboard (DESIGN §11): endpoints with their health, deliveries with filters
 * and cursor paging, a delivery's attempts, and the operations on them, all through the
 * public /api/v1 routes with the signed-in principal's credentials.
 */
import { ApiError, clearCredentials, loadCredentials, query, request, saveCredentials } from './api.js';
import { byId, h, isoToLocalInput, localInputToIso, localZone, replace, time } from './dom.js';

const PAGE_SIZE = 20;
// After a redeliver or a test, how long and how often the page looks for the new attempt, ms.
const WATCH_FOR_MS = 30_000;
const WATCH_EVERY_MS = 1_000;
const STATUSES = new Set(['pending', 'delivering', 'succeeded', 'failed']);
const CIRCUITS = new Set(['closed', 'open', 'half_open']);

/** @type {import('./api.js').Credentials | null} */
let credentials = null;
/** Cursor of each page shown so far: `[null]` is the first page; the last entry is the current page. */
const endpointPages = { cursors: [/** @type {string | null} */ (null)], next: /** @type {string | null} */ (null) };
const deliveryPages = { cursors: [/** @type {string | null} */ (null)], next: /** @type {string | null} */ (null) };
/** @type {Record<string, string>} */
let filters = {};
/** @type {string | null} */
let selectedDelivery = null;
/** Increments whenever the shown delivery changes, so a stale poll stops drawing. */
let watchGeneration = 0;
/** Increment per load, so an answer overtaken by a later load is dropped, not drawn. */
const loads = { endpoints: 0, deliveries: 0 };

/** @param {string} method @param {string} path @param {unknown} [body] */
async function api(method, path, body) {
  if (!credentials) throw new ApiError(401, 'Sign in first.');
  try {
    return await request(credentials, method, path, body);
  } catch (error) {
    // A revoked key or token mid-session: back to the sign-in form, saying why.
    if (error instanceof ApiError && error.status === 401) signOut(`Signed out: ${error.message}`);
    throw error;
  }
}

// ---- messages -------------------------------------------------------------------------

/** @param {unknown} error */
function describe(error) {
  if (error instanceof ApiError) return error.status ? `${error.message} (HTTP ${error.status})` : error.message;
  return error instanceof Error ? error.message : String(error);
}

/** @param {unknown} error */
function showError(error) {
  byId('error-text').textContent = describe(error);
  byId('error').hidden = false;
}

/** @param {string} text */
function showNotice(text) {
  const notice = byId('notice');
  notice.textContent = text;
  notice.hidden = false;
}

function clearMessages() {
  byId('error').hidden = true;
  byId('notice').hidden = true;
}

/** @param {unknown} error */
function inlineError(error) {
  return h('p', { class: 'inline-error', role: 'alert' }, describe(error));
}

// ---- sign in --------------------------------------------------------------------------

function showSignIn() {
  byId('sign-in').hidden = false;
  byId('app').hidden = true;
  byId('who').hidden = true;
}

/** @param {string} [reason] */
function signOut(reason) {
  credentials = null;
  clearCredentials();
  selectedDelivery = null;
  watchGeneration += 1;
  clearMessages();
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
  try {
    // Any principal may read the event catalog: a 401 here means the credentials are wrong.
    const catalog = await request(candidate, 'GET', '/event-types');
    fillEventNames(catalog);
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return showError(`Sign-in refused: ${error.message}`);
  }
  saveCredentials(candidate);
  form.reset();
  toggleKindFields(form);
  await enter(candidate);
}

/** @param {HTMLFormElement} form */
function toggleKindFields(form) {
  const kind = new FormData(form).get('kind');
  for (const field of form.querySelectorAll('[data-kind]')) {
    /** @type {HTMLElement} */ (field).hidden = field.getAttribute('data-kind') !== kind;
  }
}

/** @param {import('./api.js').Credentials} signedIn */
async function enter(signedIn) {
  credentials = signedIn;
  byId('who-label').textContent =
    signedIn.kind === 'service'
      ? `Service key …${signedIn.key.slice(-4)} · times in ${localZone()}`
      : `User ${signedIn.userId} · times in ${localZone()}`;
  byId('who').hidden = false;
  byId('sign-in').hidden = true;
  byId('app').hidden = false;
  endpointPages.cursors = [null];
  deliveryPages.cursors = [null];
  await Promise.all([loadEndpoints(), loadDeliveries(), loadEventNames()]);
}

// ---- endpoints ------------------------------------------------------------------------

async function loadEventNames() {
  try {
    fillEventNames(await api('GET', '/event-types'));
  } catch {
    // The catalog only feeds the event filter's suggestions; the filter still takes any name.
  }
}

/** @param {any} catalog */
function fillEventNames(catalog) {
  const names = Array.isArray(catalog?.data) ? catalog.data.map((/** @type {any} */ type) => String(type.name)) : [];
  replace(byId('event-names'), names.map((name) => h('option', { value: name })));
}

async function loadEndpoints() {
  const container = byId('endpoints');
  const cursor = endpointPages.cursors[endpointPages.cursors.length - 1];
  const load = ++loads.endpoints;
  // A refresh keeps the current table until the new one is ready, so nothing jumps.
  if (!container.querySelector('table')) replace(container, h('p', { class: 'muted' }, 'Loading endpoints…'));
  let page;
  try {
    page = await api('GET', `/endpoints${query({ limit: PAGE_SIZE, cursor })}`);
  } catch (error) {
    if (load !== loads.endpoints) return;
    replace(container, inlineError(error));
    replace(byId('endpoints-pager'));
    return;
  }
  if (load !== loads.endpoints) return;
  const endpoints = Array.isArray(page?.data) ? page.data : [];
  endpointPages.next = page?.next_cursor ?? null;
  fillEndpointFilter(endpoints);
  renderPager(byId('endpoints-pager'), endpointPages, loadEndpoints);
  if (endpoints.length === 0) {
    replace(
      container,
      h(
        'p',
        { class: 'empty' },
        endpointPages.cursors.length > 1
          ? 'No more endpoints.'
          : 'No endpoints yet. Add one with POST /api/v1/endpoints; its deliveries and health then show here.',
      ),
    );
    return;
  }
  const rows = endpoints.map((endpoint) => endpointRow(endpoint));
  await Promise.all(rows.map((row) => row.loadStats()));
  if (load !== loads.endpoints) return;
  replace(
    container,
    h(
      'table',
      { class: 'endpoints' },
      h('colgroup', {}, ['endpoint', 'state', 'health', 'actions'].map((name) => h('col', { class: `col-${name}` }))),
      h('thead', {}, h('tr', {}, h('th', {}, 'Endpoint'), h('th', {}, 'State'), h('th', {}, 'Health, last 24 h'), h('th', {}, 'Actions'))),
      h('tbody', {}, rows.map((row) => row.element)),
    ),
  );
}

/** @param {any} endpoint */
function endpointRow(endpoint) {
  const health = h('td', { class: 'health' }, h('span', { class: 'muted' }, 'Loading…'));
  const events = Array.isArray(endpoint.events) && endpoint.events.length ? endpoint.events.join(', ') : 'all events';
  const element = h(
    'tr',
    { 'data-endpoint-id': endpoint.id },
    h(
      'td',
      { class: 'endpoint' },
      h('div', { class: 'url' }, String(endpoint.url)),
      endpoint.description ? h('div', { class: 'description' }, String(endpoint.description)) : null,
      h(
        'div',
        { class: 'muted small' },
        `#${endpoint.id} · ${events} · ${endpoint.user_id == null ? 'operator endpoint' : `user ${endpoint.user_id}`}`,
      ),
    ),
    h(
      'td',
      {},
      endpoint.active ? badge('active', 'good') : badge('disabled', 'bad'),
      endpoint.disabled_reason ? h('div', { class: 'small' }, String(endpoint.disabled_reason)) : null,
    ),
    health,
    h(
      'td',
      {},
      h(
        'div',
        { class: 'actions' },
        button('Deliveries', () => showDeliveriesOf(endpoint)),
        button('Send test', () => sendTest(endpoint)),
        button('Recover…', () => openRecover(endpoint)),
        button('Rotate secret…', () => openRotate(endpoint)),
        endpoint.active
          ? button('Disable', () => setActive(endpoint, false), 'danger')
          : button('Enable', () => setActive(endpoint, true)),
      ),
    ),
  );
  return {
    element,
    async loadStats() {
      try {
        replace(health, healthView(await api('GET', `/endpoints/${encodeURIComponent(endpoint.id)}/stats`)));
      } catch (error) {
        replace(health, inlineError(error));
      }
    },
  };
}

/** @param {any} stats */
function healthView(stats) {
  const circuit = CIRCUITS.has(stats.circuit) ? stats.circuit : 'unknown';
  const circuitTone = circuit === 'closed' ? 'good' : circuit === 'open' ? 'bad' : 'warn';
  const rate = typeof stats.success_rate_24h === 'number' ? stats.success_rate_24h : null;
  return h(
    'div',
    { class: 'health-grid' },
    h('span', { class: 'label' }, 'Success'),
    h('span', { class: rate === null ? 'muted' : rate >= 0.95 ? 'good-text' : rate >= 0.5 ? 'warn-text' : 'bad-text' }, rate === null ? 'no attempts' : `${formatPercent(rate)} of ${stats.attempts_24h}`),
    h('span', { class: 'label' }, 'Latency'),
    h('span', {}, stats.p50_ms == null ? '—' : `p50 ${formatMs(stats.p50_ms)} · p95 ${formatMs(stats.p95_ms)}`),
    h('span', { class: 'label' }, 'Circuit'),
    h('span', {}, badge(circuit.replace('_', '-'), circuitTone)),
    h('span', { class: 'label' }, 'Last success'),
    time(stats.last_success_at, { compact: true }),
    h('span', { class: 'label' }, 'Last failure'),
    time(stats.last_failure_at, { compact: true }),
  );
}

/** @param {number} ms */
function formatMs(ms) {
  return ms >= 1000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms)} ms`;
}

/**
 * A URL without its scheme, for narrow cells (the full URL is in the cell's tooltip).
 *
 * @param {unknown} url
 */
function shortUrl(url) {
  const text = String(url);
  try {
    const parsed = new URL(text);
    return parsed.host + parsed.pathname;
  } catch {
    return text;
  }
}

/** @param {number} rate a fraction, 0..1 */
function formatPercent(rate) {
  const percent = rate * 100;
  return `${Number.isInteger(percent) ? percent : percent.toFixed(1)}%`;
}

/** @param {any[]} endpoints */
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
function showDeliveriesOf(endpoint) {
  const form = /** @type {HTMLFormElement} */ (byId('filters'));
  /** @type {HTMLSelectElement} */ (form.elements.namedItem('endpoint_id')).value = String(endpoint.id);
  applyFilters();
  byId('deliveries-title').scrollIntoView({ behavior: 'smooth', block: 'start' });
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

/** @param {any} endpoint */
function openRecover(endpoint) {
  clearMessages();
  const dialog = /** @type {HTMLDialogElement} */ (byId('recover-dialog'));
  const since = /** @type {HTMLInputElement} */ (dialog.querySelector('[name="since"]'));
  since.value = isoToLocalInput(new Date(Date.now() - 24 * 3600_000));
  setDialogTarget(dialog, endpoint);
  onConfirm(dialog, async () => {
    const iso = localInputToIso(since.value);
    if (!iso) throw new ApiError(0, 'Pick the time to recover from.');
    const { count } = await api('POST', `/endpoints/${encodeURIComponent(endpoint.id)}/recover`, { since: iso });
    dialog.close();
    showNotice(
      count === 0
        ? `No failed deliveries to endpoint #${endpoint.id} since then.`
        : `${count} failed ${count === 1 ? 'delivery' : 'deliveries'} to endpoint #${endpoint.id} queued again.`,
    );
    await loadDeliveries();
  });
  dialog.showModal();
}

/** @param {any} endpoint */
function openRotate(endpoint) {
  clearMessages();
  const dialog = /** @type {HTMLDialogElement} */ (byId('rotate-dialog'));
  const overlap = /** @type {HTMLInputElement} */ (dialog.querySelector('[name="overlap_hours"]'));
  const form = /** @type {HTMLElement} */ (dialog.querySelector('.dialog-form'));
  const once = /** @type {HTMLElement} */ (dialog.querySelector('.secret-once'));
  const secret = /** @type {HTMLElement} */ (dialog.querySelector('.secret'));
  overlap.value = '24';
  form.hidden = false;
  once.hidden = true;
  secret.textContent = '';
  setDialogTarget(dialog, endpoint);
  onConfirm(dialog, async () => {
    const hours = Number(overlap.value);
    if (!Number.isInteger(hours) || hours < 0 || hours > 168) throw new ApiError(0, 'The overlap is 0 to 168 whole hours.');
    const result = await api('POST', `/endpoints/${encodeURIComponent(endpoint.id)}/rotate-secret`, { overlap_hours: hours });
    secret.textContent = String(result.secret);
    form.hidden = true;
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
function setDialogTarget(dialog, endpoint) {
  replace(/** @type {HTMLElement} */ (dialog.querySelector('.dialog-target')), `Endpoint #${endpoint.id}: ${endpoint.url}`);
}

/**
 * Wires a dialog's buttons for one opening: Cancel and Done close it; the confirm button runs
 * `action`, showing its error inside the dialog (which stays open).
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

// ---- deliveries -----------------------------------------------------------------------

function applyFilters() {
  const data = new FormData(/** @type {HTMLFormElement} */ (byId('filters')));
  filters = {
    status: String(data.get('status') ?? ''),
    event: String(data.get('event') ?? '').trim(),
    endpoint_id: String(data.get('endpoint_id') ?? ''),
    since: localInputToIso(String(data.get('since') ?? '')),
    until: localInputToIso(String(data.get('until') ?? '')),
  };
  deliveryPages.cursors = [null];
  return loadDeliveries();
}

async function loadDeliveries() {
  const container = byId('deliveries');
  const cursor = deliveryPages.cursors[deliveryPages.cursors.length - 1];
  const load = ++loads.deliveries;
  let page;
  try {
    page = await api('GET', `/webhooks${query({ ...filters, limit: PAGE_SIZE, cursor })}`);
  } catch (error) {
    if (load !== loads.deliveries) return;
    replace(container, inlineError(error));
    replace(byId('deliveries-pager'));
    return;
  }
  if (load !== loads.deliveries) return;
  const deliveries = Array.isArray(page?.data) ? page.data : [];
  deliveryPages.next = page?.next_cursor ?? null;
  renderPager(byId('deliveries-pager'), deliveryPages, loadDeliveries);
  if (deliveries.length === 0) {
    const filtered = Object.values(filters).some(Boolean);
    replace(
      container,
      h(
        'p',
        { class: 'empty' },
        deliveryPages.cursors.length > 1
          ? 'No more deliveries.'
          : filtered
            ? 'No deliveries match these filters.'
            : 'No deliveries yet. They appear here when an event goes to an endpoint.',
      ),
    );
    return;
  }
  replace(
    container,
    h(
      'table',
      { class: 'deliveries' },
      h('colgroup', {}, ['created', 'event', 'endpoint', 'status', 'attempts', 'result'].map((name) => h('col', { class: `col-${name}` }))),
      h(
        'thead',
        {},
        h('tr', {}, h('th', {}, 'Created'), h('th', {}, 'Event'), h('th', {}, 'Endpoint'), h('th', {}, 'Status'), h('th', { class: 'num' }, 'Tries'), h('th', {}, 'Result')),
      ),
      h('tbody', {}, deliveries.map(deliveryRow)),
    ),
  );
}

/** @param {any} delivery */
function deliveryRow(delivery) {
  const open = () => openDelivery(String(delivery.id));
  return h(
    'tr',
    {
      'data-delivery-id': delivery.id,
      class: delivery.id === selectedDelivery ? 'selected' : undefined,
      tabindex: 0,
      on: { click: open, keydown: (/** @type {KeyboardEvent} */ event) => event.key === 'Enter' && open() },
    },
    h('td', { class: 'clip' }, time(delivery.created_at, { compact: true })),
    h('td', { class: 'clip', title: String(delivery.event) }, h('code', {}, String(delivery.event))),
    h('td', { class: 'clip', title: String(delivery.url) }, delivery.endpoint_id == null ? 'ad hoc' : `#${delivery.endpoint_id}`, ' ', h('span', { class: 'muted' }, shortUrl(delivery.url))),
    h('td', {}, statusBadge(delivery.status)),
    h('td', { class: 'num' }, Number(delivery.attempt_count ?? 0)),
    h(
      'td',
      { class: 'clip', title: delivery.last_error == null ? undefined : String(delivery.last_error) },
      delivery.last_status_code != null ? `HTTP ${delivery.last_status_code}` : delivery.last_error ? String(delivery.last_error) : h('span', { class: 'muted' }, '—'),
    ),
  );
}

/**
 * Shows one delivery with its attempts. With `watchForAttemptsAbove`, keeps reloading it
 * until it has more attempts than that (a redelivery or test landed) or WATCH_FOR_MS pass.
 *
 * @param {string} id
 * @param {{watchForAttemptsAbove?: number}} [options]
 */
async function openDelivery(id, options = {}) {
  selectedDelivery = id;
  const generation = ++watchGeneration;
  for (const row of byId('deliveries').querySelectorAll('tr[data-delivery-id]')) {
    row.classList.toggle('selected', row.getAttribute('data-delivery-id') === id);
  }
  const container = byId('delivery');
  const deadline = Date.now() + WATCH_FOR_MS;
  for (;;) {
    let delivery;
    try {
      delivery = await api('GET', `/webhooks/${encodeURIComponent(id)}`);
    } catch (error) {
      if (generation === watchGeneration) replace(container, inlineError(error));
      return;
    }
    if (generation !== watchGeneration) return;
    const attempts = Array.isArray(delivery.attempts) ? delivery.attempts : [];
    const waiting = options.watchForAttemptsAbove !== undefined && attempts.length <= options.watchForAttemptsAbove && Date.now() < deadline;
    replace(container, deliveryView(delivery, attempts, waiting));
    if (!waiting) {
      // The new attempt also changed the list's row and the endpoint's health.
      if (options.watchForAttemptsAbove !== undefined) await Promise.all([loadDeliveries(), loadEndpoints()]);
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, WATCH_EVERY_MS));
    if (generation !== watchGeneration) return;
  }
}

/** @param {any} delivery @param {any[]} attempts @param {boolean} waiting */
function deliveryView(delivery, attempts, waiting) {
  const redeliver = button('Redeliver', () => redeliverDelivery(delivery, attempts.length), 'primary');
  redeliver.disabled = waiting;
  return h(
    'div',
    { 'data-delivery-id': delivery.id },
    h('div', { class: 'detail-head' }, h('code', { class: 'delivery-id' }, String(delivery.id)), statusBadge(delivery.status), redeliver),
    h(
      'dl',
      { class: 'facts' },
      fact('Event', h('code', {}, String(delivery.event))),
      fact('Endpoint', delivery.endpoint_id == null ? 'ad hoc' : `#${delivery.endpoint_id}`),
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
  const ok = typeof attempt.status_code === 'number' && attempt.status_code >= 200 && attempt.status_code < 300;
  return h(
    'li',
    { class: 'attempt', 'data-attempt-number': attempt.number },
    h(
      'div',
      { class: 'attempt-head' },
      h('strong', {}, `#${attempt.number}`),
      attempt.status_code != null ? badge(`HTTP ${attempt.status_code}`, ok ? 'good' : 'bad') : badge('no response', 'bad'),
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

// ---- small pieces ---------------------------------------------------------------------

/**
 * @param {HTMLElement} container
 * @param {{cursors: (string | null)[], next: string | null}} pages
 * @param {() => Promise<void>} load
 */
function renderPager(container, pages, load) {
  const previous = button('‹ Newer', () => {
    pages.cursors.pop();
    return load();
  });
  previous.disabled = pages.cursors.length <= 1;
  const next = button('Older ›', () => {
    if (pages.next) pages.cursors.push(pages.next);
    return load();
  });
  next.disabled = !pages.next;
  replace(container, previous, h('span', { class: 'muted' }, `Page ${pages.cursors.length}`), next);
}

/**
 * @param {string} label
 * @param {() => unknown} onClick
 * @param {string} [tone] an extra class: primary or danger
 */
function button(label, onClick, tone) {
  return /** @type {HTMLButtonElement} */ (
    h('button', { type: 'button', class: tone, on: { click: (/** @type {Event} */ event) => (event.stopPropagation(), onClick()) } }, label)
  );
}

/** @param {string} text @param {'good' | 'bad' | 'warn' | 'neutral'} tone */
function badge(text, tone) {
  return h('span', { class: `badge ${tone}` }, text);
}

/** @param {unknown} status */
function statusBadge(status) {
  const known = typeof status === 'string' && STATUSES.has(status) ? status : 'unknown';
  const tone = known === 'succeeded' ? 'good' : known === 'failed' ? 'bad' : known === 'unknown' ? 'neutral' : 'warn';
  return badge(known, tone);
}

/** @param {unknown} statusCode @param {unknown} error */
function lastResult(statusCode, error) {
  if (statusCode == null && !error) return h('span', { class: 'muted' }, '—');
  return h('span', { class: 'last-result' }, statusCode == null ? '' : `HTTP ${statusCode}`, statusCode != null && error ? ' · ' : '', error ? String(error) : '');
}

/** @param {string} label @param {import('./dom.js').Child} value */
function fact(label, value) {
  return [h('dt', {}, label), h('dd', {}, value)];
}

// ---- start ----------------------------------------------------------------------------

function start() {
  const form = /** @type {HTMLFormElement} */ (byId('sign-in-form'));
  form.addEventListener('submit', onSignIn);
  form.addEventListener('change', () => toggleKindFields(form));
  byId('sign-out').addEventListener('click', () => signOut());
  byId('error-close').addEventListener('click', () => (byId('error').hidden = true));
  byId('endpoints-refresh').addEventListener('click', () => loadEndpoints());
  byId('deliveries-refresh').addEventListener('click', () => loadDeliveries());
  const filterForm = /** @type {HTMLFormElement} */ (byId('filters'));
  filterForm.addEventListener('submit', (event) => {
    event.preventDefault();
    applyFilters();
  });
  // After the browser has cleared the fields.
  filterForm.addEventListener('reset', () => setTimeout(applyFilters));
  const saved = loadCredentials();
  if (saved) enter(saved);
  else showSignIn();
}

start();
