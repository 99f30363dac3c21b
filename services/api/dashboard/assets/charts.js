// @ts-check
/**
 * Charts (docs/design.md §14.1): for the last hour or the last 24 h, attempts per interval by outcome
 * (stacked bars: succeeded, failed, retried) and their p50/p95 latency (lines), for every
 * endpoint the principal may see (`GET /api/v1/stats?series=`) and for one endpoint picked in
 * the list (`GET /api/v1/endpoints/{id}/stats?series=`). Drawn with uPlot, which the api serves
 * from its own installed package.
 */
// @ts-expect-error -- a URL the browser resolves against this module; the types come from the npm package below.
import uPlotModule from '../vendor/uplot/uPlot.esm.js';
import { byId, h, replace } from './dom.js';
import { inlineError } from './messages.js';
import { api } from './session.js';
import { button, formatMs } from './widgets.js';

/** @type {typeof import('uplot')} */
const uPlot = uPlotModule;

/** @typedef {{start: string, succeeded: number, failed: number, retried: number, p50_ms: number | null, p95_ms: number | null}} Bucket */
/** @typedef {'1h' | '24h'} Range */

const RANGES = {
  '1h': { label: 'the last hour', per: 'minute', seconds: 60 },
  '24h': { label: 'the last 24 hours', per: 'hour', seconds: 3600 },
};
// The page's palette (dashboard.css): outcomes in the badge colours, latencies in blues.
const COLOURS = { succeeded: '#1a7f47', failed: '#b42318', retried: '#d08a00', p50: '#2854c5', p95: '#7a94d8' };
const HEIGHT = 170;

/** @type {Range} */
let range = '1h';
/** @type {{id: number, url: string} | null} */
let picked = null;
/** The charts on the page, destroyed before they are drawn again. */
let drawn = /** @type {import('uplot')[]} */ ([]);
/** Increments per load, so an answer overtaken by a later load is dropped. */
let loads = 0;

/** Wires the range toggle, refresh, close and window resizes; call once. */
export function initCharts() {
  for (const toggle of byId('chart-range').querySelectorAll('button[data-range]')) {
    toggle.addEventListener('click', () => {
      range = /** @type {Range} */ (toggle.getAttribute('data-range'));
      loadCharts();
    });
  }
  byId('charts-refresh').addEventListener('click', () => loadCharts());
  let resizing = 0;
  window.addEventListener('resize', () => {
    clearTimeout(resizing);
    resizing = window.setTimeout(() => {
      for (const chart of drawn) chart.setSize({ width: widthOf(chart.root.parentElement), height: HEIGHT });
    }, 150);
  });
}

/** Nothing shown, no endpoint picked, the last hour (sign-in, sign-out). */
export function resetCharts() {
  range = '1h';
  picked = null;
  destroyCharts();
  replace(byId('overview-charts'));
  replace(byId('endpoint-charts'));
  byId('endpoint-charts').hidden = true;
}

/**
 * Shows an endpoint's charts beside the overview and scrolls them into view.
 *
 * @param {{id: number, url: string}} endpoint
 */
export async function showEndpointCharts(endpoint) {
  picked = { id: endpoint.id, url: String(endpoint.url) };
  await loadCharts();
  byId('charts-title').scrollIntoView({ block: 'start' });
}

/** Loads the overview's series and the picked endpoint's, then draws both. */
export async function loadCharts() {
  const load = ++loads;
  for (const toggle of byId('chart-range').querySelectorAll('button[data-range]')) {
    toggle.setAttribute('aria-pressed', String(toggle.getAttribute('data-range') === range));
  }
  const endpoint = picked;
  const [overview, single] = await Promise.all([
    fetchStats(`/stats?series=${range}`),
    endpoint ? fetchStats(`/endpoints/${encodeURIComponent(endpoint.id)}/stats?series=${range}`) : null,
  ]);
  if (load !== loads) return;
  destroyCharts();
  drawPanel(byId('overview-charts'), 'All endpoints', overview, (stats) =>
    stats.endpoints === 0 ? 'Charts appear here once there is an endpoint to deliver to.' : null,
  );
  const panel = byId('endpoint-charts');
  panel.hidden = !endpoint;
  if (endpoint) {
    const close = button('Close', () => {
      picked = null;
      loadCharts();
    });
    drawPanel(panel, `Endpoint #${endpoint.id} · ${endpoint.url}`, single, () => null, close);
    panel.setAttribute('data-endpoint-id', String(endpoint.id));
  }
}

/** @param {string} path @returns {Promise<any>} the stats, or the error to show */
async function fetchStats(path) {
  try {
    return await api('GET', path);
  } catch (error) {
    return error instanceof Error ? error : new Error(String(error));
  }
}

/**
 * One panel: its title, the totals of the range, and the two charts.
 *
 * @param {HTMLElement} panel
 * @param {string} title
 * @param {any} stats the API's answer, or the Error it gave
 * @param {(stats: any) => string | null} emptyNote a text shown instead of the charts, or null
 * @param {HTMLElement} [action] a button beside the title
 */
function drawPanel(panel, title, stats, emptyNote, action) {
  const head = h('div', { class: 'chart-head' }, h('h3', {}, title), action);
  if (stats instanceof Error) return replace(panel, head, inlineError(stats));
  const note = emptyNote(stats);
  if (note) return replace(panel, head, h('p', { class: 'empty' }, note));
  /** @type {Bucket[]} */
  const series = Array.isArray(stats.series) ? stats.series : [];
  const { label, per, seconds } = RANGES[range];
  const total = (/** @type {'succeeded' | 'failed' | 'retried'} */ outcome) => series.reduce((sum, bucket) => sum + bucket[outcome], 0);
  const [succeeded, failed, retried] = [total('succeeded'), total('failed'), total('retried')];
  const attemptsBox = h('div', { class: 'chart', 'data-chart': 'attempts' });
  const latencyBox = h('div', { class: 'chart', 'data-chart': 'latency' });
  replace(
    panel,
    head,
    h(
      'p',
      { class: 'chart-summary' },
      `${succeeded + failed + retried} attempts in ${label}: `,
      h('span', { class: 'good-text' }, `${succeeded} succeeded`),
      ', ',
      h('span', { class: 'bad-text' }, `${failed} failed`),
      ', ',
      h('span', { class: 'warn-text' }, `${retried} retried`),
    ),
    h('div', { class: 'chart-title' }, `Attempts per ${per}`),
    attemptsBox,
    h('div', { class: 'chart-title' }, `Latency per ${per}, p50 and p95`),
    latencyBox,
  );
  panel.setAttribute('data-range', range);
  // Each bar and point sits in the middle of its interval, and the axis spans the intervals
  // exactly, from the first start to the end of the current one.
  const xs = series.map((bucket) => Date.parse(bucket.start) / 1000 + seconds / 2);
  const x = { time: true, range: () => /** @type {[number, number]} */ ([xs[0] - seconds / 2, xs[xs.length - 1] + seconds / 2]) };
  drawn.push(attemptsChart(attemptsBox, xs, series, x), latencyChart(latencyBox, xs, series, x));
}

/**
 * Stacked bars: uPlot has no stacking, so each outcome's bar is drawn from zero to the sum of
 * itself and those below it, the tallest first; the legend names the outcomes.
 *
 * @param {HTMLElement} box @param {number[]} xs @param {Bucket[]} series @param {import('uplot').Scale} x
 */
function attemptsChart(box, xs, series, x) {
  const succeeded = series.map((bucket) => bucket.succeeded);
  const failed = series.map((bucket, i) => succeeded[i] + bucket.failed);
  const retried = series.map((bucket, i) => failed[i] + bucket.retried);
  const bars = uPlot.paths.bars?.({ size: [0.8, 40] });
  const bar = (/** @type {string} */ label, /** @type {string} */ colour) => ({ label, fill: colour, stroke: colour, width: 0, paths: bars, points: { show: false } });
  return new uPlot(
    {
      width: widthOf(box),
      height: HEIGHT,
      legend: { live: false },
      cursor: { show: false },
      scales: { x, y: { range: (_chart, _min, max) => [0, Math.max(4, Math.ceil(max * 1.1))] } },
      axes: [{}, { values: (_chart, splits) => splits.map((split) => (Number.isInteger(split) ? String(split) : '')) }],
      series: [{}, bar('retried', COLOURS.retried), bar('failed', COLOURS.failed), bar('succeeded', COLOURS.succeeded)],
    },
    [xs, retried, failed, succeeded],
    box,
  );
}

/**
 * p50 and p95 lines; an interval without attempts is a gap, and a point marks each value so a
 * lone interval still shows.
 *
 * @param {HTMLElement} box @param {number[]} xs @param {Bucket[]} series @param {import('uplot').Scale} x
 */
function latencyChart(box, xs, series, x) {
  const line = (/** @type {string} */ label, /** @type {string} */ colour) => ({ label, stroke: colour, width: 2, points: { show: true, size: 5, fill: colour } });
  return new uPlot(
    {
      width: widthOf(box),
      height: HEIGHT,
      legend: { live: false },
      cursor: { show: false },
      scales: { x, y: { range: (_chart, _min, max) => [0, Math.max(10, Math.ceil((max ?? 0) * 1.1))] } },
      axes: [{}, { size: 56, values: (_chart, splits) => splits.map((split) => formatMs(split)) }],
      series: [{}, line('p50', COLOURS.p50), line('p95', COLOURS.p95)],
    },
    [xs, series.map((bucket) => bucket.p50_ms), series.map((bucket) => bucket.p95_ms)],
    box,
  );
}

/** @param {Element | null} element */
function widthOf(element) {
  return Math.max(240, Math.floor(element?.clientWidth ?? 0));
}

function destroyCharts() {
  for (const chart of drawn) chart.destroy();
  drawn = [];
}
