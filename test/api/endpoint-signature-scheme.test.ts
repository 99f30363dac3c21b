import { parseEd25519SecretKey } from '../../shared/webhook';
import { ApiClient, ApiHarness, createApiHarness } from './support/api-harness';
import { createServiceKey, TestServiceKey } from './support/operations';

const SEED = Buffer.alloc(32, 3).toString('base64');

/** docs/design.md §14.1 `signature_scheme` over HTTP: create, read, rotate, and what is refused. */
describe('endpoint signature_scheme', () => {
  let harness: ApiHarness;
  let a: ApiClient;
  let b: ApiClient;
  let operator: TestServiceKey;

  beforeAll(async () => {
    harness = await createApiHarness();
    a = await harness.start('a');
    b = await harness.start('b');
    operator = await createServiceKey(harness.db, ['*']);
  });

  afterAll(() => harness.close());

  const create = (payload: object, api = a) => api.request({ method: 'POST', url: '/api/v1/endpoints', headers: operator.headers, payload });

  it('when an ed25519 endpoint is created, then the answer gives its whpk_ public key, never the private key, and reads show it', async () => {
    const res = await create({ url: 'https://ed.example.com/hooks', signature_scheme: 'ed25519' });
    expect(res.statusCode).toBe(201);
    const { id, secret, public_key: publicKey, signature_scheme: scheme } = res.json();
    expect(scheme).toBe('ed25519');
    expect(secret).toMatch(/^whpk_/);
    expect(publicKey).toBe(secret);
    expect(JSON.stringify(res.json())).not.toContain('whsk_');
    const read = await b.request({ method: 'GET', url: `/api/v1/endpoints/${id}`, headers: operator.headers });
    expect(read.json()).toMatchObject({ signature_scheme: 'ed25519', public_key: publicKey });

    const rotated = await a.request({ method: 'POST', url: `/api/v1/endpoints/${id}/rotate-secret`, headers: operator.headers, payload: {} });
    expect(rotated.json().secret).toMatch(/^whpk_/);
    expect((await b.request({ method: 'GET', url: `/api/v1/endpoints/${id}`, headers: operator.headers })).json().public_key).toBe(rotated.json().secret);
  });

  it('when an operator supplies a whsk_ seed, then its public key is the one shown, and the 64-byte form is stored', async () => {
    const res = await create({ url: 'https://ed.example.com/own', signature_scheme: 'ed25519', secret: `whsk_${SEED}` });
    expect(res.statusCode).toBe(201);
    const pair = parseEd25519SecretKey(`whsk_${SEED}`);
    expect(res.json().public_key).toBe(pair.publicKey);
    expect((await harness.db.models.WebhookEndpoint.findByPk(res.json().id))?.secret).toBe(pair.secretKey);
  });

  it('when an endpoint is HMAC, then it reads hmac-sha256 with no public key', async () => {
    expect((await create({ url: 'https://hmac.example.com/hooks' })).json()).toMatchObject({ signature_scheme: 'hmac-sha256', public_key: null, secret: expect.stringMatching(/^whsec_/) });
  });

  it.each([
    [{ signature_scheme: 'rsa' }, 'signature_scheme'],
    [{ signature_scheme: 'ed25519', secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' }, 'an ed25519 endpoint takes a whsk_ private key'],
    [{ signature_scheme: 'ed25519', secret: 'whsk_AAAA' }, 'an ed25519 endpoint takes a whsk_ private key'],
    [{ secret: `whsk_${SEED}` }, 'a whsk_ or whpk_ key needs signature_scheme "ed25519"'],
  ])('when a create sends %j, then it is a 400 naming the field', async (fields, message) => {
    const res = await create({ url: 'https://bad.example.com/hooks', ...fields });
    expect(res.statusCode).toBe(400);
    expect(res.json().message).toContain(message);
  });

  it('when a PATCH tries to change the scheme, then it is a 400 naming signature_scheme', async () => {
    const { id } = (await create({ url: 'https://fixed.example.com/hooks' })).json();
    const res = await b.request({ method: 'PATCH', url: `/api/v1/endpoints/${id}`, headers: operator.headers, payload: { signature_scheme: 'ed25519' } });
    expect(res.statusCode).toBe(400);
    expect(res.json().message).toContain('signature_scheme');
  });
});
