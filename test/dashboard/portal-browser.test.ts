import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client } from 'pg';
import { BrowserContext, Page, chromium } from 'playwright-core';
import { CHROMIUM, CHROMIUM_ARGS } from '../support/chromium';
import { createTestEnvironment, processEnv, TestEnvironment } from '../support/environment';
import { freePort, ServiceProcess, startService } from '../support/processes';
import { RecordingServer, startRecordingServer } from '../support/recording-server';

const STARTUP_MS = 60_000;
const SETUP_MS = 120_000;
const TEST_MS = 60_000;
const PORTAL_KEY = 'sk_portal_browser_test_0123456789abcdefghijklmno';
const USER_TOKEN = 'portal-browser-test-user-token-0001';
const REFUSED = 'This portal link is invalid, expired, revoked or already used.';

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/**
 * Portal links in a real browser (docs/design.md §11.6): a link opens its user's view of the
 * dashboard once; a second use, an expired or a revoked link is refused; the page works inside
 * an iframe of an origin PORTAL_FRAME_ANCESTORS allows, and the browser refuses to show it
 * inside any other. The api runs as the built process; Chromium is driven by playwright-core.
 */
describe('portal links in Chromium', () => {
  let env: TestEnvironment;
  let db: Client;
  /** The sites that embed the portal: one allowed, one not. */
  let allowed: RecordingServer;
  let other: RecordingServer;
  /** The allowed site under another name than the api's, so the embedding is cross-site as a customer's app would be. */
  let allowedOrigin: string;
  let apiUrl: string;
  let userEndpointId: number;
  let operatorUrl: string;
  let deliveryId: string;
  let userDataDir: string;
  let browser: BrowserContext;
  const services: ServiceProcess[] = [];

  beforeAll(async () => {
    env = await createTestEnvironment();
    db = new Client({ connectionString: env.databaseUrl });
    await db.connect();
    const embedding = (request: { query: Record<string, string> }) => ({
      headers: { 'content-type': 'text/html; charset=utf-8' },
      body: `<!doctype html><title>Partner app</title><iframe id="portal" width="1200" height="700" src="${(request.query.src ?? "about:blank").replace(/&/g, '&amp;').replace(/"/g, '&quot;')}"></iframe>`,
    });
    allowed = await startRecordingServer();
    allowed.setReply(embedding);
    other = await startRecordingServer();
    other.setReply(embedding);
    allowedOrigin = allowed.url.replace('127.0.0.1', 'localhost');

    await db.query(`INSERT INTO users (user_id, user_name, user_email, api_token_hash) VALUES (1, 'portal user', 'portal@example.com', $1)`, [sha256(USER_TOKEN)]);
    await db.query(`INSERT INTO service_keys (name, key_hash, scopes) VALUES ('portal minting', $1, '{portal:write}')`, [sha256(PORTAL_KEY)]);
    operatorUrl = 'http://127.0.0.1:9/operator-only-sink';
    await db.query(`INSERT INTO webhook_endpoints (url, secret, description) VALUES ($1, 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'operator sink')`, [operatorUrl]);

    const port = await freePort();
    apiUrl = `http://127.0.0.1:${port}`;
    const vars = processEnv(env, {
      LOG_LEVEL: 'warn',
      HOST: '127.0.0.1',
      API_LAYOUT: 'a',
      PORT: String(port),
      APP_URL: apiUrl,
      PORTAL_FRAME_ANCESTORS: allowedOrigin,
      OUTBOX_RELAY_INTERVAL_MS: '200',
    });
    services.push(await startService('api', 'dist/services/api/src/server.js', vars, port, STARTUP_MS));

    const userHeaders = { authorization: `Bearer ${USER_TOKEN}`, user_id: '1', 'content-type': 'application/json' };
    const endpoint = await fetch(`${apiUrl}/api/v1/endpoints`, {
      method: 'POST',
      headers: userHeaders,
      body: JSON.stringify({ url: 'http://127.0.0.1:9/user-sink', description: 'My sink' }),
    });
    expect(endpoint.status).toBe(201);
    userEndpointId = ((await endpoint.json()) as { id: number }).id;
    const test = await fetch(`${apiUrl}/api/v1/endpoints/${userEndpointId}/test`, { method: 'POST', headers: userHeaders });
    expect(test.status).toBe(202);
    deliveryId = ((await test.json()) as { id: string }).id;

    userDataDir = mkdtempSync(path.join(tmpdir(), 'portal-chromium-'));
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
    await allowed?.close();
    await other?.close();
    await db?.end();
    await env?.cleanup();
  });

  async function mint(body: object = {}): Promise<{ id: number; url: string }> {
    const res = await fetch(`${apiUrl}/api/v1/portal-links`, {
      method: 'POST',
      headers: { authorization: `Bearer ${PORTAL_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ user_id: 1, ...body }),
    });
    expect(res.status).toBe(201);
    return (await res.json()) as { id: number; url: string };
  }

  const usedAt = async (linkId: number) => (await db.query('SELECT used_at FROM portal_links WHERE id = $1', [linkId])).rows[0].used_at as Date | null;

  /** A fresh tab that records script errors, CSP refusals and failed loads. */
  async function newPage(): Promise<{ page: Page; problems: string[] }> {
    const page = await browser.newPage();
    const problems: string[] = [];
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    page.on('console', (message) => {
      if (message.type() === 'error' || /Content Security Policy|Refused to/i.test(message.text())) problems.push(`console: ${message.text()}`);
    });
    return { page, problems };
  }

  it('when a user opens their link, then they see their own endpoint and delivery, no sign-in form, and the token leaves the address bar', async () => {
    const link = await mint();
    const { page, problems } = await newPage();
    page.on('dialog', (dialog) => dialog.accept());
    await page.goto(link.url);

    const row = page.locator(`tr[data-endpoint-id="${userEndpointId}"]`);
    await row.waitFor();
    expect(await row.textContent()).toContain('My sink');
    await page.locator(`tr[data-delivery-id="${deliveryId}"]`).waitFor();
    expect(await page.locator('#who-label').textContent()).toMatch(/^User 1 · portal · manage/);
    expect(await page.locator('main').textContent()).not.toContain(operatorUrl);
    expect(await page.locator('#sign-in, #sign-in-form').count()).toBe(0);
    expect(page.url()).toBe(`${apiUrl}/portal`);
    expect(await page.title()).toBe('Webhooks portal');
    // The session lives in this tab's storage only: never a cookie, never the link's token.
    const stored = String(await page.evaluate('Object.values(sessionStorage).join(" ")'));
    expect(stored).toContain('"token":"ps_');
    expect(stored).not.toContain(new URL(link.url).hash.slice('#token='.length));
    expect(await browser.cookies()).toEqual([]);
    expect(await usedAt(link.id)).not.toBeNull();

    // A manage session changes that user's things.
    await row.getByRole('button', { name: 'Disable' }).click();
    await row.getByText('disabled', { exact: true }).waitFor();
    expect((await db.query('SELECT active FROM webhook_endpoints WHERE id = $1', [userEndpointId])).rows[0].active).toBe(false);
    await row.getByRole('button', { name: 'Enable' }).click();
    await row.getByText('active', { exact: true }).waitFor();

    // A reload keeps the session; the link itself is spent.
    await page.reload();
    await page.locator(`tr[data-endpoint-id="${userEndpointId}"]`).waitFor();
    expect(problems).toEqual([]);
    await page.close();
  }, TEST_MS);

  it('when the same link is opened a second time, then the page refuses it and shows nothing of the user', async () => {
    const link = await mint();
    const first = await newPage();
    await first.page.goto(link.url);
    await first.page.locator(`tr[data-endpoint-id="${userEndpointId}"]`).waitFor();
    await first.page.close();

    const { page } = await newPage();
    await page.goto(link.url);
    await page.locator('#portal-closed').getByText(REFUSED).waitFor();
    expect(await page.locator('#app').isHidden()).toBe(true);
    expect(page.url()).toBe(`${apiUrl}/portal`);
    expect(await page.evaluate('sessionStorage.length')).toBe(0);
    await page.close();
  }, TEST_MS);

  it.each([
    ['expired', async (id: number) => void (await db.query(`UPDATE portal_links SET expires_at = now() - interval '1 second' WHERE id = $1`, [id]))],
    [
      'revoked',
      async (id: number) =>
        expect((await fetch(`${apiUrl}/api/v1/portal-links/${id}`, { method: 'DELETE', headers: { authorization: `Bearer ${PORTAL_KEY}` } })).status).toBe(204),
    ],
  ])('when the link has %s, then the page refuses it', async (_state, spoil) => {
    const link = await mint();
    await spoil(link.id);
    const { page } = await newPage();
    await page.goto(link.url);
    await page.locator('#portal-closed').getByText(REFUSED).waitFor();
    expect(await page.locator('#app').isHidden()).toBe(true);
    expect(await usedAt(link.id)).toBeNull();
    await page.close();
  }, TEST_MS);

  it('when a read link is opened, then the page offers nothing that changes things', async () => {
    const link = await mint({ scope: 'read' });
    const { page, problems } = await newPage();
    await page.goto(link.url);
    const row = page.locator(`tr[data-endpoint-id="${userEndpointId}"]`);
    await row.waitFor();
    expect(await page.locator('#who-label').textContent()).toMatch(/^User 1 · portal · read only/);
    expect(await row.getByRole('button').allTextContents()).toEqual(['Deliveries', 'Charts']);
    await page.locator(`tr[data-delivery-id="${deliveryId}"]`).click();
    await page.locator(`#delivery [data-delivery-id="${deliveryId}"]`).waitFor();
    expect(await page.locator('#delivery').getByRole('button', { name: 'Redeliver' }).count()).toBe(0);
    expect(problems).toEqual([]);
    await page.close();
  }, TEST_MS);

  it('when the link is deleted while its page is open, then the next load ends the session with a message', async () => {
    const link = await mint();
    const { page } = await newPage();
    await page.goto(link.url);
    await page.locator(`tr[data-endpoint-id="${userEndpointId}"]`).waitFor();
    await fetch(`${apiUrl}/api/v1/portal-links/${link.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${PORTAL_KEY}` } });
    await page.locator('#endpoints-refresh').click();
    await page.locator('#portal-closed').getByText('Your portal session has ended', { exact: false }).waitFor();
    expect(await page.locator('#app').isHidden()).toBe(true);
    expect(await page.evaluate('sessionStorage.length')).toBe(0);
    await page.close();
  }, TEST_MS);

  it('when an allowed origin embeds the link in an iframe, then the user\'s view works inside it', async () => {
    const link = await mint();
    const { page, problems } = await newPage();
    page.on('dialog', (dialog) => dialog.accept());
    await page.goto(`${allowedOrigin}/embed?src=${encodeURIComponent(link.url)}`);
    const frame = page.frameLocator('#portal');
    await frame.locator(`tr[data-endpoint-id="${userEndpointId}"]`).waitFor();
    await frame.locator(`tr[data-delivery-id="${deliveryId}"]`).waitFor();
    expect(await frame.locator('#who-label').textContent()).toMatch(/^User 1 · portal/);
    // A manage session changes things from inside the frame too.
    const row = frame.locator(`tr[data-endpoint-id="${userEndpointId}"]`);
    await row.getByRole('button', { name: 'Disable' }).click();
    await row.getByText('disabled', { exact: true }).waitFor();
    expect((await db.query('SELECT active FROM webhook_endpoints WHERE id = $1', [userEndpointId])).rows[0].active).toBe(false);
    await row.getByRole('button', { name: 'Enable' }).click();
    await row.getByText('active', { exact: true }).waitFor();
    expect(problems).toEqual([]);
    await page.close();
  }, TEST_MS);

  it('when another origin embeds the link or the dashboard, then the browser refuses to show them and the link stays unused', async () => {
    const link = await mint();
    const { page, problems } = await newPage();
    const refused = page.waitForEvent('console', { predicate: (message) => /frame-ancestors/.test(message.text()) });
    await page.goto(`${other.url}/embed?src=${encodeURIComponent(link.url)}`);
    expect((await refused).text()).toContain(`frame-ancestors 'self' ${allowedOrigin}`);
    expect(page.frames().some((frame) => frame.url().startsWith(`${apiUrl}/portal`) && frame.url() !== 'about:blank')).toBe(false);
    expect(await page.frameLocator('#portal').locator('#app').count()).toBe(0);
    expect(await usedAt(link.id)).toBeNull();

    // The dashboard, where keys are typed, is not framed even by the allowed origin.
    const dashboard = await newPage();
    const dashboardRefused = dashboard.page.waitForEvent('console', { predicate: (message) => /frame-ancestors 'none'/.test(message.text()) });
    await dashboard.page.goto(`${allowedOrigin}/embed?src=${encodeURIComponent(`${apiUrl}/dashboard`)}`);
    await dashboardRefused;
    expect(await dashboard.page.frameLocator('#portal').locator('#sign-in-form').count()).toBe(0);
    expect(problems.every((problem) => /frame-ancestors/.test(problem))).toBe(true);
    await page.close();
    await dashboard.page.close();
  }, TEST_MS);
});
