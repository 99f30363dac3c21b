import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client } from 'pg';
import { BrowserContext, Page, chromium } from 'playwright-core';
import { CHROMIUM, CHROMIUM_ARGS } from '../support/chromium';
import { createTestEnvironment, processEnv, TestEnvironment } from '../support/environment';
import { freePort, ROOT, ServiceProcess, startService } from '../support/processes';
import { RecordingServer, startRecordingServer } from '../support/recording-server';
import { certificateMaker } from '../support/test-certificates';
import { waitFor } from '../support/wait-for';

// Bounds for a busy machine: how long a process may take to become ready, and the set-up.
const STARTUP_MS = 60_000;
const SETUP_MS = 150_000;
const TEST_MS = 90_000;
const SERVICE_KEY = 'sk_dashboard_browser_test_0123456789abcdefghijk';
const READ_ONLY_KEY = 'sk_dashboard_browser_test_webhooks_read_only_01';
const USER_TOKEN = 'dashboard-browser-test-user-token-0001';
const ACCEPTED = '{"status":"OK","message":"Accepted"}';
// API answers are attacker-influenced: the page must show these as text and never run them.
const HOSTILE_DESCRIPTION = `Flaky peer <img src=x onerror="document.title='owned'">`;
const HOSTILE_RESPONSE = `<html><img src=x onerror="document.title='owned'"><script>document.title='owned'</script>down</html>`;

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
// The charts' colours (charts.js): bars by outcome, the p95 latency line.
const SUCCEEDED = '#1a7f47';
const FAILED = '#b42318';
const RETRIED = '#d08a00';
const P95 = '#7a94d8';

/** How many pixels of the chart's canvas are exactly `colour` (#rrggbb, opaque): what was drawn. */
async function pixelsOf(page: Page, chart: string, colour: string): Promise<number> {
  return page.locator(`${chart} canvas`).evaluate((canvas, hex) => {
    const [r, g, b] = [1, 3, 5].map((at) => parseInt(hex.slice(at, at + 2), 16));
    const { data } = canvas.getContext('2d')!.getImageData(0, 0, canvas.width, canvas.height);
    let count = 0;
    for (let i = 0; i < data.length; i += 4) if (data[i] === r && data[i + 1] === g && data[i + 2] === b && data[i + 3] === 255) count += 1;
    return count;
  }, colour);
}

/**
 * The dashboard in a real browser (docs/design.md §11.5): the api and a worker as the
 * built processes, a real receiving peer on 127.0.0.1, and Chromium driven by playwright-core.
 * With DASHBOARD_SCREENSHOT=<file.png> it also saves the page after the redelivery.
 */
describe('the dashboard in Chromium', () => {
  let env: TestEnvironment;
  let db: Client;
  let peer: RecordingServer;
  /** Layout A's api; Layout B's answers errors in the other shape. */
  let apiUrl: string;
  let apiBUrl: string;
  let endpointId: number;
  let flakyEndpointId: number;
  let deliveryId: string;
  let flakyDeliveryId: string;
  let userDataDir: string;
  let browser: BrowserContext;
  const services: ServiceProcess[] = [];

  beforeAll(async () => {
    env = await createTestEnvironment();
    db = new Client({ connectionString: env.databaseUrl });
    await db.connect();
    peer = await startRecordingServer();
    peer.setReply((request) =>
      request.path === '/hooks/posts'
        ? { status: 200, headers: { 'content-type': 'application/json' }, body: ACCEPTED }
        : { status: 500, headers: { 'content-type': 'text/html' }, body: HOSTILE_RESPONSE },
    );
    await db.query(`INSERT INTO users (user_id, user_name, user_email, api_token_hash) VALUES (1, 'writer', 'writer@example.com', $1)`, [
      sha256(USER_TOKEN),
    ]);
    await db.query(`INSERT INTO service_keys (name, key_hash, scopes) VALUES ('dashboard test', $1, '{*}'), ('read only', $2, '{webhooks:read}')`, [
      sha256(SERVICE_KEY),
      sha256(READ_ONLY_KEY),
    ]);
    const addEndpoint = async (url: string, description: string) =>
      (
        await db.query(`INSERT INTO webhook_endpoints (url, secret, events, description) VALUES ($1, $2, '{post.created}', $3) RETURNING id`, [
          url,
          'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
          description,
        ])
      ).rows[0].id as number;
    endpointId = await addEndpoint(`${peer.url}/hooks/posts`, 'Posts sink');
    flakyEndpointId = await addEndpoint(`${peer.url}/hooks/flaky`, HOSTILE_DESCRIPTION);

    const [apiPort, apiBPort, workerPort] = [await freePort(), await freePort(), await freePort()];
    const shared = processEnv(env, {
      LOG_LEVEL: 'warn',
      HOST: '127.0.0.1',
      WEBHOOK_RETRY_SCHEDULE: '0.2,0.5,1',
      OUTBOX_RELAY_INTERVAL_MS: '200',
      WORKER_SHUTDOWN_TIMEOUT_MS: '5000',
    });
    // Each started process is tracked at once, so afterAll stops it even when a sibling failed.
    const start = async (name: string, script: string, env: Record<string, string>, port: number) => {
      services.push(await startService(name, script, { ...shared, ...env }, port, STARTUP_MS));
    };
    const started = await Promise.allSettled([
      start('api', 'dist/services/api/src/server.js', { API_LAYOUT: 'a', PORT: String(apiPort) }, apiPort),
      start('api-b', 'dist/services/api/src/server.js', { API_LAYOUT: 'b', PORT: String(apiBPort) }, apiBPort),
      start('webhook-worker', 'dist/services/webhook-worker/src/main.js', { WORKER_METRICS_PORT: String(workerPort) }, workerPort),
    ]);
    const failed = started.find((result) => result.status === 'rejected');
    if (failed) throw failed.reason;
    apiUrl = `http://127.0.0.1:${apiPort}`;
    apiBUrl = `http://127.0.0.1:${apiBPort}`;

    const created = await fetch(`${apiUrl}/api/v1/posts/create`, {
      method: 'POST',
      headers: { authorization: `Bearer ${USER_TOKEN}`, user_id: '1', 'content-type': 'application/json' },
      body: JSON.stringify({ title: 'Seen on the dashboard', body: 'A post whose delivery the dashboard shows', userId: 1 }),
    });
    expect(created.status).toBe(200);
    const deliveryTo = (id: number, status: string) => async () =>
      (await db.query(`SELECT id FROM webhook_deliveries WHERE endpoint_id = $1 AND status = $2`, [id, status])).rows[0]?.id as string;
    deliveryId = await waitFor(deliveryTo(endpointId, 'succeeded'), 30_000, 'the post.created delivery to succeed');
    flakyDeliveryId = await waitFor(deliveryTo(flakyEndpointId, 'failed'), 30_000, 'the delivery to the flaky peer to fail');

    userDataDir = mkdtempSync(path.join(tmpdir(), 'dashboard-chromium-'));
    browser = await chromium.launchPersistentContext(userDataDir, {
      executablePath: CHROMIUM,
      headless: true,
      args: CHROMIUM_ARGS,
      viewport: { width: 1280, height: 800 },
    });
  }, SETUP_MS);

  afterAll(async () => {
    await browser?.close();
    if (userDataDir) rmSync(userDataDir, { recursive: true, force: true });
    await Promise.all(services.map((service) => service.stop('SIGKILL')));
    await peer?.close();
    await db?.end();
    await env?.cleanup();
  });

  /** A fresh tab on /dashboard that records script errors, CSP refusals and failed loads. */
  async function openDashboard(baseUrl = apiUrl): Promise<{ page: Page; problems: string[] }> {
    const page = await browser.newPage();
    const problems: string[] = [];
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    page.on('console', (message) => {
      if (message.type() === 'error' || /Content Security Policy|Refused to/i.test(message.text())) problems.push(`console: ${message.text()}`);
    });
    await page.goto(`${baseUrl}/dashboard`);
    return { page, problems };
  }

  it('when an operator signs in with a service key, then they see the endpoint and the delivery, and a redelivery shows its new attempt', async () => {
    const { page, problems } = await openDashboard();
    await page.getByLabel('Service key', { exact: true }).fill(SERVICE_KEY);
    await page.getByRole('button', { name: 'Sign in' }).click();

    const endpointRow = page.locator(`tr[data-endpoint-id="${endpointId}"]`);
    await endpointRow.waitFor();
    expect(await endpointRow.textContent()).toContain(`${peer.url}/hooks/posts`);
    await endpointRow.getByText('Circuit').waitFor();
    await expect(endpointRow.locator('.badge').allTextContents()).resolves.toEqual(expect.arrayContaining(['active', 'closed']));

    const deliveryRow = page.locator(`tr[data-delivery-id="${deliveryId}"]`);
    await deliveryRow.waitFor();
    expect(await deliveryRow.textContent()).toContain('post.created');
    await deliveryRow.click();
    const detail = page.locator(`#delivery [data-delivery-id="${deliveryId}"]`);
    await detail.locator('.attempt[data-attempt-number="1"]').waitFor();
    expect(await detail.locator('.attempt .excerpt').first().textContent()).toBe(ACCEPTED);

    await detail.getByRole('button', { name: 'Redeliver' }).click();
    await page.locator('#delivery .attempt[data-attempt-number="2"]').waitFor({ timeout: 20_000 });
    expect(await page.locator('#delivery h3').textContent()).toBe('Attempts (2)');
    const sentToSink = peer.requests.filter((request) => request.path === '/hooks/posts');
    expect(sentToSink.map((request) => request.headers['webhook-id'])).toEqual([deliveryId, deliveryId]);
    await page.locator(`tr[data-delivery-id="${deliveryId}"]`).getByText('2', { exact: true }).waitFor();

    // The flaky peer's failure episode (docs/design.md §6.6): since its first failed attempt, every
    // attempt of its delivery failed; the sink has none open.
    const [{ failing_since: failingSince }] = (await db.query('SELECT failing_since FROM webhook_endpoints WHERE id = $1', [flakyEndpointId])).rows;
    const episode = page.locator(`tr[data-endpoint-id="${flakyEndpointId}"] .episode`);
    expect(await episode.locator('time').getAttribute('datetime')).toBe(failingSince.toISOString());
    expect(await episode.textContent()).toMatch(/ · 4 failed attempts in a row$/);
    expect(await page.locator(`tr[data-endpoint-id="${endpointId}"] .health`).textContent()).not.toContain('Failing since');
    expect(await page.locator(`tr[data-endpoint-id="${flakyEndpointId}"] .health`).textContent()).toContain('Failing since');

    // The flaky peer's hostile description and response are on the page as text, and did nothing.
    expect(await page.locator(`tr[data-endpoint-id="${flakyEndpointId}"] .description`).textContent()).toBe(HOSTILE_DESCRIPTION);
    await page.locator(`tr[data-delivery-id="${flakyDeliveryId}"]`).click();
    await page.locator(`#delivery [data-delivery-id="${flakyDeliveryId}"] .attempt`).first().waitFor();
    expect(await page.locator('#delivery .excerpt').first().textContent()).toBe(HOSTILE_RESPONSE);
    expect(await page.locator('main img, main script').count()).toBe(0);
    expect(await page.title()).toBe('Webhooks dashboard');
    expect(problems).toEqual([]);
    // The credentials live in this tab's session storage only, never in a cookie or the URL.
    expect(await browser.cookies()).toEqual([]);
    expect(page.url()).toBe(`${apiUrl}/dashboard`);

    // Charts: the overview counts every attempt of the last hour by outcome, as the attempt log
    // has them: the flaky delivery's last attempt failed, the ones before it were retried.
    const [{ ok, other }] = (
      await db.query(
        `SELECT count(*) FILTER (WHERE status_code BETWEEN 200 AND 299)::int AS ok, count(*) FILTER (WHERE status_code IS NULL OR status_code NOT BETWEEN 200 AND 299)::int AS other FROM webhook_attempts`,
      )
    ).rows;
    const overview = page.locator('#overview-charts');
    await overview.getByText(`${ok + other} attempts in the last hour`).waitFor();
    expect(await overview.locator('.chart-summary').textContent()).toBe(`${ok + other} attempts in the last hour: ${ok} succeeded, 1 failed, ${other - 1} retried`);
    expect(await overview.locator('[data-chart="attempts"] .u-legend').textContent()).toContain('succeeded');
    for (const colour of [SUCCEEDED, FAILED, RETRIED]) expect({ colour, drawn: (await pixelsOf(page, '#overview-charts [data-chart="attempts"]', colour)) > 20 }).toEqual({ colour, drawn: true });
    expect(await pixelsOf(page, '#overview-charts [data-chart="latency"]', P95)).toBeGreaterThan(0);

    // One endpoint's charts: the sink's two attempts, both 2xx, and nothing failed drawn.
    await page.locator(`tr[data-endpoint-id="${endpointId}"]`).getByRole('button', { name: 'Charts' }).click();
    const single = page.locator(`#endpoint-charts[data-endpoint-id="${endpointId}"]`);
    await single.getByText('2 attempts in the last hour: 2 succeeded, 0 failed, 0 retried').waitFor();
    expect(await single.locator('h3').textContent()).toBe(`Endpoint #${endpointId} · ${peer.url}/hooks/posts`);
    expect(await pixelsOf(page, '#endpoint-charts [data-chart="attempts"]', SUCCEEDED)).toBeGreaterThan(20);
    expect(await pixelsOf(page, '#endpoint-charts [data-chart="attempts"]', FAILED)).toBe(0);
    expect(await pixelsOf(page, '#endpoint-charts [data-chart="latency"]', P95)).toBeGreaterThan(0);

    // The last 24 h, by hour, and back.
    await page.getByRole('button', { name: 'Last 24 h' }).click();
    await single.getByText('2 attempts in the last 24 hours: 2 succeeded').waitFor();
    await page.locator('#overview-charts[data-range="24h"]').waitFor();
    expect(await pixelsOf(page, '#endpoint-charts [data-chart="attempts"]', SUCCEEDED)).toBeGreaterThan(20);
    expect(await page.getByRole('button', { name: 'Last 24 h' }).getAttribute('aria-pressed')).toBe('true');
    await page.getByRole('button', { name: 'Last hour' }).click();
    await single.getByText('2 attempts in the last hour').waitFor();
    expect(problems).toEqual([]);

    const screenshot = process.env.DASHBOARD_SCREENSHOT;
    if (screenshot) {
      await page.locator(`tr[data-delivery-id="${deliveryId}"]`).click();
      await page.locator(`#delivery [data-delivery-id="${deliveryId}"] .attempt`).first().waitFor();
      await page.evaluate('window.scrollTo(0, 0)');
      await page.screenshot({ path: path.resolve(ROOT, screenshot), fullPage: true });
    }
    await page.close();
  }, TEST_MS);

  it('when an operator filters, tests, rotates, disables, enables and recovers, then each shows its result and the API did it', async () => {
    const { page, problems } = await openDashboard();
    page.on('dialog', (dialog) => dialog.accept());
    await page.getByLabel('Service key', { exact: true }).fill(SERVICE_KEY);
    await page.getByRole('button', { name: 'Sign in' }).click();
    const flakyRow = page.locator(`tr[data-endpoint-id="${flakyEndpointId}"]`);
    const sinkRow = page.locator(`tr[data-endpoint-id="${endpointId}"]`);
    await flakyRow.waitFor();

    await page.locator('#filters [name="status"]').selectOption('failed');
    await page.locator('#filters').getByRole('button', { name: 'Apply' }).click();
    await page.locator(`tr[data-delivery-id="${deliveryId}"]`).waitFor({ state: 'detached' });
    expect(await page.locator('#deliveries tr[data-delivery-id]').evaluateAll((rows) => rows.map((row) => row.getAttribute('data-delivery-id')))).toEqual([
      flakyDeliveryId,
    ]);
    await page.locator('#filters [name="event"]').fill('no.such.event');
    await page.locator('#filters').getByRole('button', { name: 'Apply' }).click();
    await page.getByText('No deliveries match these filters.').waitFor();
    await page.locator('#filters').getByRole('button', { name: 'Clear' }).click();
    await page.locator(`tr[data-delivery-id="${deliveryId}"]`).waitFor();

    await sinkRow.getByRole('button', { name: 'Send test' }).click();
    await page.locator('#delivery .attempt[data-attempt-number="1"]').waitFor({ timeout: 20_000 });
    expect(await page.locator('#delivery .facts').textContent()).toContain('webhook.test');
    expect(peer.requests.some((request) => request.path === '/hooks/posts' && request.body.toString().includes('webhook.test'))).toBe(true);

    await sinkRow.getByRole('button', { name: 'Rotate secret…' }).click();
    await page.locator('#rotate-dialog [data-confirm]').click();
    await page.locator('#rotate-dialog .secret-once').waitFor();
    const secret = await page.locator('#rotate-dialog .secret').textContent();
    expect(secret).toMatch(/^whsec_/);
    expect((await db.query('SELECT secret FROM webhook_endpoints WHERE id = $1', [endpointId])).rows[0].secret).toBe(secret);
    await page.locator('#rotate-dialog .secret-once').getByRole('button', { name: 'Done' }).click();
    // The dialog's close event, which clears the secret, is dispatched as a task after the click.
    await page.locator('#rotate-dialog .secret').evaluate(
      (element) => new Promise<void>((resolve) => (element.textContent === '' ? resolve() : element.closest('dialog')?.addEventListener('close', () => resolve(), { once: true }))),
    );

    await sinkRow.getByRole('button', { name: 'Controls…' }).click();
    await page.locator('#controls-dialog [name="headers"]').fill('Authorization: Basic dXNlcjpwYXNz\nX-Tenant: acme');
    await page.locator('#controls-dialog [name="ordering"]').selectOption('fifo');
    await page.locator('#controls-dialog [name="rate_limit_per_s"]').fill('25');
    await page.locator('#controls-dialog [name="filter"]').fill('{"title": ["a", "b"]}');
    await page.locator('#controls-dialog [data-confirm]').click();
    await page.getByText(`Endpoint #${endpointId} saved.`).waitFor();
    expect((await db.query('SELECT headers, ordering, rate_limit_per_s FROM webhook_endpoints WHERE id = $1', [endpointId])).rows[0]).toEqual({
      headers: { authorization: 'Basic dXNlcjpwYXNz', 'x-tenant': 'acme' },
      ordering: 'fifo',
      rate_limit_per_s: 25,
    });
    expect((await db.query('SELECT filter FROM webhook_endpoints WHERE id = $1', [endpointId])).rows[0].filter).toEqual({ title: ['a', 'b'] });
    // Opened again, the credential reads masked, and saving it unchanged keeps the stored value.
    await sinkRow.getByRole('button', { name: 'Controls…' }).click();
    expect(await page.locator('#controls-dialog [name="headers"]').inputValue()).toBe('authorization: ********\nx-tenant: acme');
    await page.locator('#controls-dialog [name="rate_limit_per_s"]').fill('');
    await page.locator('#controls-dialog [data-confirm]').click();
    await page.getByText(`Endpoint #${endpointId} saved.`).waitFor();
    expect((await db.query('SELECT headers, rate_limit_per_s FROM webhook_endpoints WHERE id = $1', [endpointId])).rows[0]).toEqual({
      headers: { authorization: 'Basic dXNlcjpwYXNz', 'x-tenant': 'acme' },
      rate_limit_per_s: null,
    });

    await flakyRow.getByRole('button', { name: 'Disable' }).click();
    await flakyRow.getByText('disabled', { exact: true }).waitFor();
    expect((await db.query('SELECT active FROM webhook_endpoints WHERE id = $1', [flakyEndpointId])).rows[0].active).toBe(false);
    expect(await flakyRow.locator('.episode').count()).toBe(1);
    await flakyRow.getByRole('button', { name: 'Enable' }).click();
    await flakyRow.getByText('active', { exact: true }).waitFor();
    expect((await db.query('SELECT active FROM webhook_endpoints WHERE id = $1', [flakyEndpointId])).rows[0].active).toBe(true);
    // The re-enable closed its failure episode.
    expect(await flakyRow.locator('.episode').count()).toBe(0);

    const flakyRequests = peer.requests.filter((request) => request.path === '/hooks/flaky').length;
    await flakyRow.getByRole('button', { name: 'Recover…' }).click();
    await page.locator('#recover-dialog [data-confirm]').click();
    await page.getByText(`1 failed delivery to endpoint #${flakyEndpointId} queued again.`).waitFor();
    await waitFor(
      async () => peer.requests.filter((request) => request.path === '/hooks/flaky').length > flakyRequests,
      15_000,
      'the recovered delivery to be attempted again',
    );
    expect(problems).toEqual([]);
    await page.close();
  }, TEST_MS);

  it('when an operator sets OAuth2 credentials and a client certificate in Controls, then the row shows them, warns of the expiry within 14 days, and the page never holds the secret or the key', async () => {
    const certificate = certificateMaker().client('dash.sender', { days: 10 });
    const secured = (
      await db.query(`INSERT INTO webhook_endpoints (url, secret, description) VALUES ('https://hooks.example.test/secured', $1, 'Secured') RETURNING id`, [
        'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
      ])
    ).rows[0].id as number;
    const { page, problems } = await openDashboard();
    await page.getByLabel('Service key', { exact: true }).fill(SERVICE_KEY);
    await page.getByRole('button', { name: 'Sign in' }).click();
    const row = page.locator(`tr[data-endpoint-id="${secured}"]`);
    await row.waitFor();

    await row.getByRole('button', { name: 'Controls…' }).click();
    const dialog = page.locator('#controls-dialog');
    expect(await dialog.locator('.current-certificate').textContent()).toBe('None now.');
    await dialog.locator('[name="auth_token_url"]').fill('https://auth.example.test/oauth/token');
    await dialog.locator('[name="auth_client_id"]').fill('dash-sender');
    await dialog.locator('[name="auth_client_secret"]').fill('dash-secret');
    await dialog.locator('[name="auth_scope"]').fill('hooks:write');
    await dialog.locator('[name="client_cert"]').fill(certificate.cert);
    await dialog.locator('[name="client_key"]').fill(certificate.key);
    await dialog.locator('[data-confirm]').click();
    await page.getByText(`Endpoint #${secured} saved.`).waitFor();
    const stored = async () => (await db.query('SELECT auth, client_cert, client_key FROM webhook_endpoints WHERE id = $1', [secured])).rows[0];
    const expected = {
      auth: { type: 'oauth2_client_credentials', token_url: 'https://auth.example.test/oauth/token', client_id: 'dash-sender', client_secret: 'dash-secret', scope: 'hooks:write' },
      client_cert: certificate.cert.trim(),
      client_key: certificate.key.trim(),
    };
    expect(await stored()).toEqual(expected);

    await row.locator('.client-certificate .badge.warn').waitFor();
    expect(await row.locator('.auth').textContent()).toBe('OAuth2 · client dash-sender · token from auth.example.test');
    expect(await row.locator('.client-certificate').textContent()).toMatch(/^mTLS · CN=dash\.sender · until \d{4}-\d\d-\d\d certificate expires in (9|10) days$/);

    // Opened again, the secret reads masked and the key is not there; saving unchanged keeps both.
    await row.getByRole('button', { name: 'Controls…' }).click();
    expect(await dialog.locator('[name="auth_client_secret"]').inputValue()).toBe('********');
    expect(await dialog.locator('[name="client_key"]').inputValue()).toBe('');
    expect(await dialog.locator('.current-certificate').textContent()).toMatch(/^Now: CN=dash\.sender, until /);
    const html = await page.content();
    for (const secret of ['dash-secret', 'PRIVATE KEY', certificate.key.split('\n')[1]]) expect(html).not.toContain(secret);
    await dialog.locator('[data-confirm]').click();
    await page.getByText(`Endpoint #${secured} saved.`).waitFor();
    expect(await stored()).toEqual(expected);

    // Removing both.
    await row.getByRole('button', { name: 'Controls…' }).click();
    await dialog.locator('[name="auth_token_url"]').fill('');
    await dialog.locator('[name="remove_client_certificate"]').check();
    await dialog.locator('[data-confirm]').click();
    await page.getByText(`Endpoint #${secured} saved.`).waitFor();
    expect(await stored()).toEqual({ auth: null, client_cert: null, client_key: null });
    await row.locator('.client-certificate').waitFor({ state: 'detached' });
    expect(problems).toEqual([]);
    await page.close();
  }, TEST_MS);

  it('when a user signs in with their token and id, then they see none of the operator endpoint, its deliveries or its responses', async () => {
    const { page, problems } = await openDashboard();
    await page.getByLabel('a user token').check();
    await page.getByLabel('User token', { exact: true }).fill(USER_TOKEN);
    await page.getByLabel('User id', { exact: true }).fill('1');
    await page.getByRole('button', { name: 'Sign in' }).click();

    await page.getByText('User 1', { exact: false }).waitFor();
    await page.getByText('No endpoints yet.', { exact: false }).waitFor();
    await page.getByText('No deliveries yet.', { exact: false }).waitFor();
    expect(await page.locator('main').textContent()).not.toContain(peer.url);
    expect(problems).toEqual([]);
    await page.close();
  }, TEST_MS);

  it.each([
    ['A', () => apiUrl, 'Invalid authentication token or client ID.'],
    ['B', () => apiBUrl, 'Invalid credentials.'],
  ])('when the key is wrong on Layout %s, then the sign-in is refused with the API message and nothing is kept', async (_layout, baseUrl, message) => {
    const { page } = await openDashboard(baseUrl());
    await page.getByLabel('Service key', { exact: true }).fill('sk_not_a_key_of_this_api_0123456789abcdefghij');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').getByText(`Sign-in refused: ${message}`).waitFor();
    expect(await page.locator('#app').isHidden()).toBe(true);
    expect(await page.evaluate('sessionStorage.length')).toBe(0);
    await page.close();
  }, TEST_MS);

  it('when a key lacks a scope on Layout B, then that part of the page shows the 403 message and the rest works', async () => {
    const { page, problems } = await openDashboard(apiBUrl);
    await page.getByLabel('Service key', { exact: true }).fill(READ_ONLY_KEY);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('#endpoints').getByText('This key lacks the scope endpoints:read. (HTTP 403)').waitFor();
    await page.locator(`tr[data-delivery-id="${deliveryId}"]`).waitFor();
    // The browser reports the refused request itself; nothing else went wrong.
    expect(problems.filter((problem) => !problem.includes('status of 403'))).toEqual([]);
    await page.close();
  }, TEST_MS);
});
