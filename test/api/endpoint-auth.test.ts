import { certificateMaker, TestCertificate } from '../support/test-certificates';
import { ApiClient, ApiHarness, createApiHarness } from './support/api-harness';
import { createServiceKey, TestServiceKey } from './support/operations';

const AUTH = {
  type: 'oauth2_client_credentials',
  token_url: 'https://auth.example.com/oauth/token',
  client_id: 'sender',
  client_secret: 'first-secret',
  scope: 'webhooks:write',
};

/**
 * docs/design.md §14.4, `auth` and `client_certificate` as the API takes and shows them: the
 * shapes (400 naming the field), the client secret and the key never shown, "********" keeping
 * them, and the rules they add to a change of `url` or of the token endpoint.
 */
describe('endpoint auth and client certificate over the API', () => {
  let harness: ApiHarness;
  let api: ApiClient;
  let operator: TestServiceKey;
  let certs: ReturnType<typeof certificateMaker>;
  let client: TestCertificate;

  beforeAll(async () => {
    harness = await createApiHarness();
    api = await harness.start('a');
    operator = await createServiceKey(harness.db, ['*']);
    certs = certificateMaker();
    client = certs.client('sender.example', { issuer: certs.authority('Test CA'), days: 30 });
  });

  afterAll(async () => {
    await harness.close();
  });

  const create = (payload: object, on = api) => on.request({ method: 'POST', url: '/api/v1/endpoints', headers: operator.headers, payload });
  const created = async (payload: object) => {
    const res = await create(payload);
    expect([res.statusCode, res.body]).toEqual([201, expect.any(String)]);
    return res.json() as { id: number } & Record<string, unknown>;
  };
  const patch = (id: number, payload: object) => api.request({ method: 'PATCH', url: `/api/v1/endpoints/${id}`, headers: operator.headers, payload });
  const read = async (id: number) => (await api.request({ url: `/api/v1/endpoints/${id}`, headers: operator.headers })).json();
  const stored = async (id: number) =>
    (await harness.db.models.WebhookEndpoint.findByPk(id, { attributes: ['url', 'auth', 'clientCert', 'clientKey', 'headers'] }))!.get({ plain: true });
  const messageOf = (res: { statusCode: number; json(): any }) => [res.statusCode, res.json().message];

  describe('auth (OAuth2 client credentials)', () => {
    it('when an endpoint is made with auth, then every read shows it with the client secret masked and the secret is stored as given', async () => {
      const endpoint = await created({ url: 'https://hooks.example.com/in', auth: AUTH });
      const shown = { ...AUTH, client_secret: '********', audience: null };
      expect(endpoint.auth).toEqual(shown);
      expect((await read(endpoint.id)).auth).toEqual(shown);
      const list = (await api.request({ url: '/api/v1/endpoints', headers: operator.headers })).json();
      expect(list.data.find((row: { id: number }) => row.id === endpoint.id).auth).toEqual(shown);
      expect(JSON.stringify(list)).not.toContain('first-secret');
      expect((await stored(endpoint.id)).auth).toEqual(AUTH);
    });

    it.each([
      [{ ...AUTH, type: 'oauth1' }, 'auth.type'],
      [{ ...AUTH, token_url: undefined }, 'auth.token_url'],
      [{ ...AUTH, token_url: 'ftp://auth.example.com/token' }, 'auth.token_url'],
      [{ ...AUTH, client_id: '' }, 'auth.client_id'],
      [{ ...AUTH, client_secret: undefined }, 'auth.client_secret'],
      [{ ...AUTH, scope: 7 }, 'auth.scope'],
      [{ ...AUTH, grant_type: 'password' }, 'grant_type'],
      ['Bearer x', 'auth'],
    ])('when auth is %j, then the create is 400 naming %s and nothing is stored', async (auth, field) => {
      const before = await harness.db.models.WebhookEndpoint.count();
      const res = await create({ url: 'https://hooks.example.com/in', auth });
      expect(messageOf(res)).toEqual([400, expect.stringContaining(field)]);
      expect(await harness.db.models.WebhookEndpoint.count()).toBe(before);
    });

    it('when "********" is sent as the client secret of an endpoint with none stored, then it is 400 naming auth.client_secret', async () => {
      expect(messageOf(await create({ url: 'https://hooks.example.com/in', auth: { ...AUTH, client_secret: '********' } }))).toEqual([
        400,
        expect.stringContaining('auth.client_secret'),
      ]);
      const endpoint = await created({ url: 'https://hooks.example.com/in' });
      expect(messageOf(await patch(endpoint.id, { auth: { ...AUTH, client_secret: '********' } }))).toEqual([400, expect.stringContaining('auth.client_secret')]);
    });

    it('when auth comes with an authorization header, or one is added to the other later, then it is 400 naming both', async () => {
      const both = await create({ url: 'https://hooks.example.com/in', auth: AUTH, headers: { Authorization: 'Basic eDp5' } });
      expect(messageOf(both)).toEqual([400, expect.stringMatching(/auth.*headers\.authorization/)]);
      const withAuth = await created({ url: 'https://hooks.example.com/in', auth: AUTH });
      expect(messageOf(await patch(withAuth.id, { headers: { authorization: 'Basic eDp5' } }))).toEqual([400, expect.stringContaining('headers.authorization')]);
      const withHeader = await created({ url: 'https://hooks.example.com/in', headers: { authorization: 'Basic eDp5' } });
      expect(messageOf(await patch(withHeader.id, { auth: AUTH }))).toEqual([400, expect.stringContaining('headers.authorization')]);
      // Replacing the header by auth in one PATCH is fine.
      expect((await patch(withHeader.id, { auth: AUTH, headers: {} })).statusCode).toBe(200);
      expect((await stored(withAuth.id)).headers).toEqual({});
    });

    it('when a PATCH sends auth with "********" for the secret, then the stored secret is kept; a new secret replaces it; null removes auth', async () => {
      const endpoint = await created({ url: 'https://hooks.example.com/in', auth: AUTH });
      const kept = await patch(endpoint.id, { auth: { ...AUTH, client_secret: '********', client_id: 'renamed', scope: undefined, audience: 'https://hooks.example.com' } });
      expect([kept.statusCode, kept.json().auth]).toEqual([
        200,
        { ...AUTH, client_id: 'renamed', client_secret: '********', scope: null, audience: 'https://hooks.example.com' },
      ]);
      const { scope: _dropped, ...rest } = AUTH;
      expect((await stored(endpoint.id)).auth).toEqual({ ...rest, client_id: 'renamed', audience: 'https://hooks.example.com' });
      expect((await patch(endpoint.id, { auth: { ...AUTH, client_secret: 'second-secret' } })).statusCode).toBe(200);
      expect((await stored(endpoint.id)).auth).toEqual({ ...AUTH, client_secret: 'second-secret' });
      const removed = await patch(endpoint.id, { auth: null });
      expect([removed.statusCode, removed.json().auth, (await stored(endpoint.id)).auth]).toEqual([200, null, null]);
    });

    it('when a PATCH moves token_url to another origin and keeps the secret masked, then it is 400 naming auth.client_secret; a path change keeps it', async () => {
      const endpoint = await created({ url: 'https://hooks.example.com/in', auth: AUTH });
      const moved = await patch(endpoint.id, { auth: { ...AUTH, token_url: 'https://evil.example.net/token', client_secret: '********' } });
      expect(messageOf(moved)).toEqual([400, expect.stringMatching(/auth\.token_url.*auth\.client_secret/)]);
      expect((await stored(endpoint.id)).auth).toEqual(AUTH);
      const samePlace = await patch(endpoint.id, { auth: { ...AUTH, token_url: 'https://AUTH.example.com:443/v2/token', client_secret: '********' } });
      expect(samePlace.statusCode).toBe(200);
      expect((await stored(endpoint.id)).auth).toMatchObject({ token_url: 'https://AUTH.example.com:443/v2/token', client_secret: 'first-secret' });
      const given = await patch(endpoint.id, { auth: { ...AUTH, token_url: 'https://login.example.org/token', client_secret: 'for-the-new-issuer' } });
      expect(given.statusCode).toBe(200);
    });

    it('when a PATCH moves the url to another origin while auth is stored, then it is 400 naming auth.client_secret unless the same PATCH gives it again or removes auth', async () => {
      const endpoint = await created({ url: 'https://hooks.example.com/in', auth: AUTH });
      for (const payload of [
        { url: 'https://other.example.com/in' },
        { url: 'https://other.example.com/in', auth: { ...AUTH, client_secret: '********' } },
      ]) {
        expect(messageOf(await patch(endpoint.id, payload))).toEqual([
          400,
          expect.stringContaining('url: moving to another origin needs the masked credentials given again in the same PATCH: auth.client_secret'),
        ]);
      }
      expect((await stored(endpoint.id)).url).toBe('https://hooks.example.com/in');
      expect((await patch(endpoint.id, { url: 'https://hooks.example.com/elsewhere' })).statusCode).toBe(200);
      expect((await patch(endpoint.id, { url: 'https://other.example.com/in', auth: { ...AUTH, client_secret: 'again' } })).statusCode).toBe(200);
      expect((await patch(endpoint.id, { url: 'https://third.example.com/in', auth: null })).statusCode).toBe(200);
    });
  });

  describe('client_certificate (mutual TLS)', () => {
    it('when an https endpoint is made with a certificate and its key, then reads show its subject and expiry only, never the key', async () => {
      const endpoint = await created({ url: 'https://hooks.example.com/in', client_certificate: client });
      const expected = { subject: 'CN=sender.example', not_after: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000Z$/) };
      expect(endpoint.client_certificate).toEqual(expected);
      const notAfter = new Date((endpoint.client_certificate as { not_after: string }).not_after).getTime();
      expect(Math.abs(notAfter - (Date.now() + 30 * 86_400_000))).toBeLessThan(86_400_000);
      expect((await read(endpoint.id)).client_certificate).toEqual(expected);
      const list = await api.request({ url: '/api/v1/endpoints', headers: operator.headers });
      expect(list.body).not.toContain('PRIVATE KEY');
      expect(list.body).not.toContain('BEGIN CERTIFICATE');
      expect(await stored(endpoint.id)).toMatchObject({ clientCert: client.cert, clientKey: client.key });
    });

    it.each([
      ['a certificate that does not parse', 'client_certificate.cert', () => ({ cert: '-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n', key: client.key })],
      ['a key that does not parse', 'client_certificate.key', () => ({ cert: client.cert, key: 'not a key' })],
      ['a key of another pair', 'client_certificate.key', () => ({ cert: client.cert, key: certs.key() })],
      ['no key', 'client_certificate.key', () => ({ cert: client.cert })],
      ['a key only', 'client_certificate.cert', () => ({ key: client.key })],
    ])('when the create gives %s, then it is 400 naming %s', async (_case, field, certificate) => {
      expect(messageOf(await create({ url: 'https://hooks.example.com/in', client_certificate: certificate() }))).toEqual([400, expect.stringContaining(field)]);
    });

    it('when the endpoint url is http, then a certificate is refused with 400, on create and on a PATCH of either', async () => {
      expect(messageOf(await create({ url: 'http://hooks.example.com/in', client_certificate: client }))).toEqual([400, expect.stringContaining('client_certificate')]);
      const plain = await created({ url: 'http://hooks.example.com/in' });
      expect(messageOf(await patch(plain.id, { client_certificate: client }))).toEqual([400, expect.stringContaining('https')]);
      const secure = await created({ url: 'https://hooks.example.com/in', client_certificate: client });
      expect(messageOf(await patch(secure.id, { url: 'http://hooks.example.com/in', client_certificate: client }))).toEqual([400, expect.stringContaining('https')]);
    });

    it('when a PATCH renews the certificate with "********" as the key, then the stored key is kept if it matches, else 400', async () => {
      const endpoint = await created({ url: 'https://hooks.example.com/in', client_certificate: client });
      const other = certs.client('other.example', { days: 90 });
      expect(messageOf(await patch(endpoint.id, { client_certificate: { cert: other.cert, key: '********' } }))).toEqual([400, expect.stringContaining('client_certificate.key')]);
      const res = await patch(endpoint.id, { client_certificate: { cert: client.cert, key: '********' }, description: 'renewed' });
      expect([res.statusCode, res.json().client_certificate.subject]).toEqual([200, 'CN=sender.example']);
      expect((await stored(endpoint.id)).clientKey).toBe(client.key);
      const removed = await patch(endpoint.id, { client_certificate: null });
      expect([removed.json().client_certificate, (await stored(endpoint.id)).clientKey]).toEqual([null, null]);
    });

    it('when a PATCH moves the url to another origin while a certificate is stored, then it is 400 naming client_certificate.key unless given again', async () => {
      const endpoint = await created({ url: 'https://hooks.example.com/in', client_certificate: client, auth: AUTH });
      const refused = await patch(endpoint.id, { url: 'https://other.example.com/in', auth: { ...AUTH, client_secret: 'again' } });
      expect(messageOf(refused)).toEqual([400, expect.stringMatching(/: client_certificate\.key\./)]);
      const masked = await patch(endpoint.id, { url: 'https://other.example.com/in', client_certificate: { cert: client.cert, key: '********' } });
      expect(messageOf(masked)).toEqual([400, expect.stringContaining('auth.client_secret, client_certificate.key')]);
      const given = await patch(endpoint.id, { url: 'https://other.example.com/in', auth: { ...AUTH, client_secret: 'again' }, client_certificate: client });
      expect(given.statusCode).toBe(200);
    });
  });

  describe('in production', () => {
    let production: ApiClient;

    beforeAll(async () => {
      production = await harness.start('a', { nodeEnv: 'production', webhookPrivateAllowlist: ['receiver', '10.0.0.0/8'] });
    });

    it.each([
      ['the url', { url: 'http://hooks.example.com/in', auth: AUTH }, 'url'],
      ['the token url', { url: 'https://hooks.example.com/in', auth: { ...AUTH, token_url: 'http://auth.example.com/token' } }, 'auth.token_url'],
    ])('when %s of an endpoint with auth is http, then it is 400 naming it', async (_case, payload, field) => {
      expect(messageOf(await create(payload, production))).toEqual([400, expect.stringContaining(`${field}: must be https`)]);
    });

    it('when the http hosts are in WEBHOOK_PRIVATE_ALLOWLIST, or the endpoint has no auth, then http is accepted', async () => {
      expect((await create({ url: 'http://receiver:3002/in', auth: { ...AUTH, token_url: 'http://10.1.2.3/token' } }, production)).statusCode).toBe(201);
      expect((await create({ url: 'http://hooks.example.com/in' }, production)).statusCode).toBe(201);
    });
  });
});
