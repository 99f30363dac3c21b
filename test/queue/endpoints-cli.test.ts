import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Database, createDatabase } from '../../shared/db';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { idAt } from '../support/partitions';
import { certificateMaker } from '../support/test-certificates';

const CLI = path.resolve(__dirname, '../../dist/scripts/endpoints-cli.js');

describe('endpoints CLI', () => {
  let env: TestEnvironment;
  let db: Database;

  beforeAll(async () => {
    if (!existsSync(CLI)) throw new Error('the CLI is not built: run `npm run build` first');
    env = await createTestEnvironment({}, 'cli');
    db = createDatabase(env.databaseUrl, { poolMax: 1 });
  });

  afterAll(async () => {
    await db.close();
    await env.cleanup();
  });

  function cli(...args: string[]) {
    const result = spawnSync(process.execPath, [CLI, ...args], {
      env: { PATH: process.env.PATH ?? '', NODE_ENV: 'test', DATABASE_URL: env.databaseUrl, REDIS_URL: env.redisUrl, REDIS_PREFIX: env.redisPrefix },
      encoding: 'utf8',
    });
    return { status: result.status, stdout: result.stdout, stderr: result.stderr };
  }

  it('When an endpoint is added without a secret, then one JSON line gives its id and a whsec_ secret of 32 random bytes', () => {
    const added = cli('add', '--url', 'https://example.com/hooks', '--events', 'post.created, post.deleted', '--description', 'shop');

    expect(added.status).toBe(0);
    expect(added.stdout.trim().split('\n')).toHaveLength(1);
    const { id, secret } = JSON.parse(added.stdout);
    expect(Number.isInteger(id)).toBe(true);
    expect(secret).toMatch(/^whsec_/);
    expect(Buffer.from(secret.slice(6), 'base64')).toHaveLength(32);
    const listed = cli('list').stdout.trim().split('\n').map((line) => JSON.parse(line));
    expect(listed).toContainEqual({
      id,
      url: 'https://example.com/hooks',
      events: ['post.created', 'post.deleted'],
      active: true,
      description: 'shop',
      headers: {},
      ordering: 'unordered',
      rateLimitPerS: null,
      filter: null,
      auth: null,
      clientCertificate: null,
      disabledReason: null,
      previousSecretExpiresAt: null,
    });
  });

  it('When an endpoint is added with headers and fifo ordering, then list masks the credential, and update replaces or clears them', async () => {
    const added = cli('add', '--url', 'https://example.com/ordered', '--header', 'Authorization: Basic dXNlcjpwYXNz', '--header', 'X-Tenant: acme', '--ordering', 'fifo');
    expect(added.status).toBe(0);
    const { id } = JSON.parse(added.stdout);
    const listed = cli('list').stdout.trim().split('\n').map((line) => JSON.parse(line)).find((endpoint) => endpoint.id === id);
    expect(listed).toMatchObject({ headers: { authorization: '********', 'x-tenant': 'acme' }, ordering: 'fifo' });
    expect((await db.models.WebhookEndpoint.findByPk(id))!.headers).toEqual({ authorization: 'Basic dXNlcjpwYXNz', 'x-tenant': 'acme' });

    const updated = cli('update', '--id', String(id), '--header', 'X-Region: eu', '--ordering', 'unordered', '--rate-limit', '50');
    expect(JSON.parse(updated.stdout)).toEqual({ id, headers: { 'x-region': 'eu' }, ordering: 'unordered', rate_limit_per_s: 50, filter: null, auth: null, client_certificate: null });
    expect(JSON.parse(cli('update', '--id', String(id), '--filter', '{"tier":["gold","silver"]}').stdout)).toMatchObject({ filter: { tier: ['gold', 'silver'] } });
    expect(cli('update', '--id', String(id), '--filter', '[1]').stderr).toContain('filter: must be a JSON object');
    expect(JSON.parse(cli('update', '--id', String(id), '--rate-limit', 'none').stdout)).toMatchObject({ rate_limit_per_s: null });
    expect(cli('update', '--id', String(id), '--rate-limit', '0').status).toBe(2);
    expect(JSON.parse(cli('update', '--id', String(id), '--no-headers').stdout)).toMatchObject({ headers: {} });

    const refused = cli('add', '--url', 'https://example.com/bad', '--header', 'Host: evil');
    expect(refused.status).toBe(2);
    expect(refused.stderr).toContain('headers: host cannot be set');
  });

  it('When an endpoint is added with credentials in its URL, then userinfo is refused and list masks sensitive query values', async () => {
    const refused = cli('add', '--url', 'https://user:pw@example.com/hooks');
    expect(refused.status).toBe(2);
    expect(refused.stderr).toContain('error: credentials go in headers or auth, not in the URL');
    expect(refused.stderr).not.toContain('pw');

    const added = cli('add', '--url', 'https://example.com/hooks?api_key=SECRET&page=2');
    expect(added.status).toBe(0);
    const { id } = JSON.parse(added.stdout);
    const listed = cli('list').stdout.trim().split('\n').map((line) => JSON.parse(line)).find((endpoint) => endpoint.id === id);
    expect(listed.url).toBe('https://example.com/hooks?api_key=********&page=2');
    expect((await db.models.WebhookEndpoint.findByPk(id))!.url).toBe('https://example.com/hooks?api_key=SECRET&page=2');
  });

  it('When an endpoint is added with OAuth2 client credentials and a client certificate, then list masks the secret and shows the certificate, and update keeps, replaces or removes them', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'endpoints-cli-'));
    try {
      const certs = certificateMaker();
      const first = certs.client('first.sender', { days: 10 });
      const second = certs.client('second.sender');
      const files = Object.fromEntries(
        Object.entries({ 'first.pem': first.cert, 'first.key': first.key, 'second.pem': second.cert, 'second.key': second.key }).map(([name, pem]) => {
          writeFileSync(path.join(dir, name), pem);
          return [name, path.join(dir, name)];
        }),
      );
      const oauth = ['--auth-token-url', 'https://auth.example.com/token', '--auth-client-id', 'sender', '--auth-client-secret', 'cli-secret', '--auth-scope', 'hooks'];
      const added = cli('add', '--url', 'https://example.com/secured', ...oauth, '--client-cert', files['first.pem'], '--client-key', files['first.key']);
      expect([added.status, added.stderr]).toEqual([0, '']);
      const { id } = JSON.parse(added.stdout);
      const listed = cli('list').stdout.trim().split('\n').map((line) => JSON.parse(line)).find((endpoint) => endpoint.id === id);
      expect(listed).toMatchObject({
        auth: { type: 'oauth2_client_credentials', token_url: 'https://auth.example.com/token', client_id: 'sender', client_secret: '********', scope: 'hooks', audience: null },
        clientCertificate: { subject: 'CN=first.sender', not_after: expect.any(String) },
      });
      expect(cli('list').stdout).not.toContain('cli-secret');
      expect(await db.models.WebhookEndpoint.findByPk(id)).toMatchObject({ auth: { client_secret: 'cli-secret' }, clientKey: first.key });

      // A renewed certificate for the same key: the key is kept; the secret is kept with "********".
      const kept = cli('update', '--id', String(id), '--client-cert', files['first.pem'], '--auth-token-url', 'https://auth.example.com/v2/token', '--auth-client-id', 'sender', '--auth-client-secret', '********');
      expect([kept.status, kept.stderr]).toEqual([0, '']);
      expect(JSON.parse(kept.stdout)).toMatchObject({ auth: { token_url: 'https://auth.example.com/v2/token', client_secret: '********', scope: null }, client_certificate: { subject: 'CN=first.sender' } });
      expect(await db.models.WebhookEndpoint.findByPk(id)).toMatchObject({ auth: { client_secret: 'cli-secret' }, clientKey: first.key });
      const mismatched = cli('update', '--id', String(id), '--client-cert', files['second.pem']);
      expect([mismatched.status, mismatched.stderr]).toEqual([2, expect.stringContaining('client_certificate.key: does not match the certificate')]);
      const replaced = cli('update', '--id', String(id), '--client-cert', files['second.pem'], '--client-key', files['second.key']);
      expect(JSON.parse(replaced.stdout).client_certificate.subject).toBe('CN=second.sender');

      const removed = cli('update', '--id', String(id), '--no-auth', '--no-client-certificate');
      expect(JSON.parse(removed.stdout)).toMatchObject({ auth: null, client_certificate: null });
      expect(await db.models.WebhookEndpoint.findByPk(id)).toMatchObject({ auth: null, clientCert: null, clientKey: null });

      expect(cli('add', '--url', 'http://example.com/plain', '--client-cert', files['first.pem'], '--client-key', files['first.key'])).toMatchObject({
        status: 2,
        stderr: expect.stringContaining('client_certificate: needs an https url'),
      });
      expect(cli('add', '--url', 'https://example.com/x', '--auth-client-id', 'sender')).toMatchObject({ status: 2, stderr: expect.stringContaining('--auth-token-url') });
      expect(cli('add', '--url', 'https://example.com/x', '--client-cert', path.join(dir, 'missing.pem'), '--client-key', files['first.key'])).toMatchObject({
        status: 2,
        stderr: expect.stringContaining('--client-cert: cannot read'),
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('When an endpoint is added with a secret and then disabled, then list shows it inactive', () => {
    const { id, secret } = JSON.parse(cli('add', '--url', 'http://127.0.0.1:3002/webhooks/posts', '--secret', 'my-secret').stdout);

    const disabled = cli('disable', '--id', String(id));

    expect(secret).toBe('my-secret');
    expect(JSON.parse(disabled.stdout)).toEqual({ id, active: false });
    const listed = cli('list').stdout.trim().split('\n').map((line) => JSON.parse(line));
    expect(listed.find((endpoint) => endpoint.id === id)).toMatchObject({ active: false, disabledReason: 'disabled by an operator' });
  });

  it('When an endpoint is rotated, then the new whsec_ secret is current and the old one stays previous for 24 hours', async () => {
    const { id, secret: old } = JSON.parse(cli('add', '--url', 'https://example.com/rotating').stdout);
    const before = Date.now();

    const rotated = cli('rotate', '--id', String(id));

    expect(rotated.status).toBe(0);
    expect(rotated.stdout.trim().split('\n')).toHaveLength(1);
    const output = JSON.parse(rotated.stdout);
    expect(Object.keys(output)).toEqual(['id', 'secret', 'previous_secret_expires_at']);
    expect(output.id).toBe(id);
    expect(output.secret).toMatch(/^whsec_/);
    expect(output.secret).not.toBe(old);
    expect(Buffer.from(output.secret.slice(6), 'base64')).toHaveLength(32);
    expect(output.previous_secret_expires_at).toBe(new Date(output.previous_secret_expires_at).toISOString());
    const expiresAt = Date.parse(output.previous_secret_expires_at);
    expect(expiresAt - before).toBeGreaterThan(24 * 3_600_000 - 60_000);
    expect(expiresAt - Date.now()).toBeLessThan(24 * 3_600_000 + 60_000);
    const row = await db.models.WebhookEndpoint.findByPk(id, { rejectOnEmpty: true });
    expect(row.secret).toBe(output.secret);
    expect(row.previousSecret).toBe(old);
    expect(row.previousSecretExpiresAt?.toISOString()).toBe(output.previous_secret_expires_at);
    const listed = cli('list').stdout.trim().split('\n').map((line) => JSON.parse(line));
    expect(listed.find((endpoint) => endpoint.id === id)).toMatchObject({ previousSecretExpiresAt: output.previous_secret_expires_at });
    expect(cli('list').stdout).not.toContain(old);
  });

  it('When an endpoint is rotated twice with given secrets and overlaps, then only the last old secret is kept, until its overlap ends', async () => {
    const { id } = JSON.parse(cli('add', '--url', 'https://example.com/rotating-twice', '--secret', 'first-secret').stdout);
    cli('rotate', '--id', String(id), '--secret', 'second-secret');

    const rotated = cli('rotate', '--id', String(id), '--secret', 'third-secret', '--overlap-hours', '1.5');

    const output = JSON.parse(rotated.stdout);
    expect(output.secret).toBe('third-secret');
    expect(Math.abs(Date.parse(output.previous_secret_expires_at) - Date.now() - 5_400_000)).toBeLessThan(60_000);
    const row = await db.models.WebhookEndpoint.findByPk(id, { rejectOnEmpty: true });
    expect([row.secret, row.previousSecret]).toEqual(['third-secret', 'second-secret']);
  });

  it('When a disabled endpoint is enabled, then it is active again with no disabled reason', () => {
    const { id } = JSON.parse(cli('add', '--url', 'https://example.com/re-enabled').stdout);
    cli('disable', '--id', String(id));

    const enabled = cli('enable', '--id', String(id));

    expect(enabled.status).toBe(0);
    expect(JSON.parse(enabled.stdout)).toEqual({ id, active: true });
    const listed = cli('list').stdout.trim().split('\n').map((line) => JSON.parse(line));
    expect(listed.find((endpoint) => endpoint.id === id)).toMatchObject({ active: true, disabledReason: null });
  });

  it('When an endpoint with a pending delivery is deleted, then it is gone from the list and the delivery failed with "endpoint deleted"', async () => {
    const { id } = JSON.parse(cli('add', '--url', 'https://example.com/deleted').stdout);
    const pendingId = idAt('msg_', new Date());
    await db.models.WebhookDelivery.create({ id: pendingId, endpointId: id, url: 'https://example.com/deleted', event: 'post.created', body: '{}' });

    const deleted = cli('delete', '--id', String(id));

    expect(deleted.status).toBe(0);
    expect(JSON.parse(deleted.stdout)).toEqual({ id, deleted: true });
    const listed = cli('list').stdout.trim().split('\n').filter(Boolean).map((line) => JSON.parse(line));
    expect(listed.map((endpoint) => endpoint.id)).not.toContain(id);
    const delivery = await db.models.WebhookDelivery.findByPk(pendingId, { rejectOnEmpty: true });
    expect([delivery.status, delivery.lastError]).toEqual(['failed', 'endpoint deleted']);
    expect(cli('delete', '--id', String(id)).stderr).toMatch(`No endpoint has id ${id}.`);
  });

  it('When an ed25519 endpoint is added and rotated, then each prints its whpk_ public key, and the stored private key signs', async () => {
    const added = cli('add', '--url', 'https://example.com/ed', '--signature-scheme', 'ed25519');
    expect(added.status).toBe(0);
    const { id, secret } = JSON.parse(added.stdout);
    expect(secret).toMatch(/^whpk_/);
    const row = await db.models.WebhookEndpoint.findByPk(id);
    expect(row).toMatchObject({ signatureScheme: 'ed25519', publicKey: secret, secret: expect.stringMatching(/^whsk_/) });
    const rotated = JSON.parse(cli('rotate', '--id', String(id)).stdout);
    expect(rotated.secret).toMatch(/^whpk_/);
    expect(rotated.secret).not.toBe(secret);
    expect(cli('rotate', '--id', String(id), '--secret', 'whsk_AAAA')).toMatchObject({ status: 2, stderr: expect.stringContaining('an ed25519 endpoint takes a whsk_ private key') });
    expect(cli('add', '--url', 'https://example.com/ed', '--signature-scheme', 'rsa')).toMatchObject({ status: 2, stderr: expect.stringContaining('--signature-scheme must be') });
  });

  it('When an endpoint replays, then the past events it never got are queued, and a reach past retention is a usage error', async () => {
    const replayedEvents = [0, 1, 2].map((n) => idAt('evt_', new Date(Date.now() - 1_000 + n)));
    await db.sequelize.query(
      `INSERT INTO webhook_events (id, created_at, kind, event, body, user_id) VALUES
         ($1, webhook_id_time($1), 'post', 'order.cli', '{"_data":{"n":1}}', NULL),
         ($2, webhook_id_time($2), 'fan-out', 'order.cli', '{"_data":{"n":2}}', NULL),
         ($3, webhook_id_time($3), 'test', 'order.cli', '{"_data":{"n":3}}', NULL)`,
      { bind: replayedEvents },
    );
    const { id } = JSON.parse(cli('add', '--url', 'https://example.com/replayed').stdout);

    const replayed = cli('replay', '--id', String(id), '--since', new Date(Date.now() - 60_000).toISOString());
    expect(replayed).toMatchObject({ status: 0, stdout: `{"id":${id},"count":2}\n` });
    // By the ids' time: their base64url text does not sort as their bytes ('z' comes before '0').
    const [rows] = await db.sequelize.query('SELECT event_id, enqueued_at IS NOT NULL AS queued FROM webhook_deliveries WHERE endpoint_id = $1 ORDER BY webhook_id_time(event_id)', {
      bind: [id],
    });
    expect(rows).toEqual([
      { event_id: replayedEvents[0], queued: true },
      { event_id: replayedEvents[1], queued: true },
    ]);
    expect(cli('replay', '--id', String(id), '--since', new Date(Date.now() - 60_000).toISOString()).stdout).toBe(`{"id":${id},"count":0}\n`);

    const tooOld = cli('replay', '--id', String(id), '--since', '2020-01-01T00:00:00Z');
    expect(tooOld.status).toBe(2);
    expect(tooOld.stderr).toContain('error: since must be within the last');
    expect(cli('replay', '--id', String(id), '--since', 'yesterday')).toMatchObject({ status: 2, stderr: expect.stringContaining('--since must be an ISO 8601 time') });
  });

  it('When an endpoint subscribes to an event type an operator added, then add accepts it', async () => {
    await db.models.WebhookEventType.create({ name: 'invoice.paid', description: null, schema: null });

    const added = cli('add', '--url', 'https://example.com/invoices', '--events', 'invoice.paid,post.created');

    expect(added.status).toBe(0);
    const row = await db.models.WebhookEndpoint.findByPk(JSON.parse(added.stdout).id, { rejectOnEmpty: true });
    expect(row.events).toEqual(['invoice.paid', 'post.created']);
  });

  it.each([
    [['rotate'], 2, /--id is required/],
    [['rotate', '--id', '0'], 2, /--id must be a positive integer/],
    [['rotate', '--id', '1', '--overlap-hours=-1'], 2, /--overlap-hours must be a number of hours from 0 to 720/],
    [['rotate', '--id', '1', '--overlap-hours', 'soon'], 2, /--overlap-hours/],
    [['rotate', '--id', '1', '--overlap-hours', '721'], 2, /--overlap-hours/],
    [['rotate', '--id', '1', '--secret', 'whsec_not base64!'], 2, /--secret must be whsec_ followed by base64/],
    [['rotate', '--id', '999999'], 1, /No endpoint has id 999999/],
    [['add'], 2, /--url is required/],
    [['add', '--url', 'ftp://example.com'], 2, /http or https/],
    [['add', '--url', 'http://example.com', '--secret', 'whsec_***'], 2, /--secret/],
    [['add', '--url', 'http://example.com', '--events', 'post.created,post.archived,user.x'], 2, /Unknown event types: post.archived, user.x\./],
    [['enable', '--id', '999999'], 1, /No endpoint has id 999999/],
    [['delete'], 2, /--id is required/],
    [['disable', '--id', 'abc'], 2, /positive integer/],
    [['disable', '--id', '999999'], 1, /No endpoint has id 999999/],
    [['remove'], 2, /Unknown command "remove"/],
    [['list', '--bogus'], 2, /bogus/],
  ])('When the command line is %j, then it exits %i with a clear error', (args, status, message) => {
    const result = cli(...(args as string[]));

    expect(result.status).toBe(status);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(message as RegExp);
  });
});
