import nacl from 'tweetnacl';
import {
  generateEd25519KeyPair,
  parseEd25519SecretKey,
  signStandardEd25519,
  signedHeaders,
  verifyStandard,
  verifyStandardEd25519,
} from '../../shared/webhook';
import { EncryptionError, LogicError } from '../../shared/webhook/errors';

// RFC 8032 §7.1, TEST 1: a seed and the public key it makes. Signatures are also checked
// against tweetnacl, an independent ed25519 implementation, both ways.
const RFC8032_SEED = Buffer.from('9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60', 'hex');
const RFC8032_PUBLIC = Buffer.from('d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a', 'hex');

const ID = 'msg_2KWPBgLlAfxdpx2AI54pPJ85f4W';
const TS = 1_764_000_000;
const BODY = '{"_data":{"pid":1,"title":"héllo"},"_config":{"app.webhook.event":"post.created","app.webhook.signable":1}}';
const headersOf = (signature: string) => ({ 'webhook-id': ID, 'webhook-timestamp': String(TS), 'webhook-signature': signature });

/** Standard Webhooks `v1a` (docs/design.md §14.1): whsk_/whpk_ keys, signing and verifying. */
describe('ed25519 signatures (v1a)', () => {
  it('when a key is given as a 32-byte seed or as 64 bytes, then both read as the same pair, the RFC 8032 public key, emitted in the 64-byte form', () => {
    const short = parseEd25519SecretKey(`whsk_${RFC8032_SEED.toString('base64')}`);
    expect(short.publicKey).toBe(`whpk_${RFC8032_PUBLIC.toString('base64')}`);
    expect(short.secretKey).toBe(`whsk_${Buffer.concat([RFC8032_SEED, RFC8032_PUBLIC]).toString('base64')}`);
    expect(parseEd25519SecretKey(short.secretKey)).toEqual(short);
  });

  it.each([
    ['another prefix', `whsec_${RFC8032_SEED.toString('base64')}`, 'expected whsk_'],
    ['bad base64', 'whsk_not base64!', 'must be base64'],
    ['a wrong length', `whsk_${Buffer.alloc(48).toString('base64')}`, '32 or 64 bytes'],
    ['a public half of another seed', `whsk_${Buffer.concat([RFC8032_SEED, Buffer.alloc(32, 1)]).toString('base64')}`, 'not the public key of its seed'],
  ])('when a whsk_ key has %s, then it is refused naming why', (_case, key, message) => {
    expect(() => parseEd25519SecretKey(key)).toThrow(LogicError);
    expect(() => parseEd25519SecretKey(key)).toThrow(message);
  });

  it('when the Standard Webhooks reference vector is signed, then the v1a signature is byte for byte the published one', () => {
    // github.com/standard-webhooks/standard-webhooks, libraries/go/webhook_asymmetric_test.go,
    // TestAsymmetricWebhookSign (commit 5fb2ce9369bd9533ed635c0c84f8d7b0dac3a5bf).
    const secretKey = 'whsk_VEVTVFNJR05JTkdLRVlET05PVFVTRVRISVNGT1JBTlk=';
    const signature = signStandardEd25519('msg_p5jXN8AQM9LWM0D4loKWxJek', 1614265330, '{"test": 2432232314}', secretKey);
    expect(signature).toBe('v1a,tQ9V2XOqn7jL/DQenEFpqIugdBVtiMmER5mhSkXBNwM0mkATuDe6KYYUuxqtaiHeYGb7KaaBRdM5WqyeFiL8Ag==');
    const headers = { 'webhook-id': 'msg_p5jXN8AQM9LWM0D4loKWxJek', 'webhook-timestamp': '1614265330', 'webhook-signature': signature };
    expect(verifyStandard('{"test": 2432232314}', headers, parseEd25519SecretKey(secretKey).publicKey, { now: 1614265330 }).id).toBe('msg_p5jXN8AQM9LWM0D4loKWxJek');
  });

  it('when we sign, then tweetnacl verifies the signature over id.timestamp.body with the whpk_ key', () => {
    const { secretKey, publicKey } = generateEd25519KeyPair();
    const signature = signStandardEd25519(ID, TS, BODY, secretKey);
    expect(signature).toMatch(/^v1a,[A-Za-z0-9+/]{86}==$/);
    const message = Buffer.from(`${ID}.${TS}.${BODY}`, 'utf8');
    const raw = Buffer.from(signature.slice(4), 'base64');
    expect(nacl.sign.detached.verify(message, raw, Buffer.from(publicKey.slice(5), 'base64'))).toBe(true);
    expect(nacl.sign.detached.verify(Buffer.from(`${ID}.${TS}.${BODY} `, 'utf8'), raw, Buffer.from(publicKey.slice(5), 'base64'))).toBe(false);
  });

  it('when tweetnacl signs, then verifyStandard accepts it with the whpk_ key, and refuses any change to id, timestamp or body', () => {
    const pair = nacl.sign.keyPair.fromSeed(RFC8032_SEED);
    const signature = `v1a,${Buffer.from(nacl.sign.detached(Buffer.from(`${ID}.${TS}.${BODY}`, 'utf8'), pair.secretKey)).toString('base64')}`;
    const publicKey = `whpk_${Buffer.from(pair.publicKey).toString('base64')}`;
    expect(verifyStandard(BODY, headersOf(signature), publicKey, { now: TS })).toEqual({ id: ID, timestamp: TS });
    expect(() => verifyStandard(`${BODY} `, headersOf(signature), publicKey, { now: TS })).toThrow(EncryptionError);
    expect(() => verifyStandard(BODY, { ...headersOf(signature), 'webhook-id': 'msg_other' }, publicKey, { now: TS })).toThrow('No matching signature found.');
    expect(() => verifyStandard(BODY, { ...headersOf(signature), 'webhook-timestamp': String(TS + 1) }, publicKey, { now: TS })).toThrow('No matching signature found.');
    expect(verifyStandardEd25519(ID, TS, BODY, 'not base64!', publicKey)).toBe(false);
  });

  it('when a key rotates, then both v1a signatures are listed and either public key verifies; a v1a entry never passes as v1, nor v1 as v1a', () => {
    const current = generateEd25519KeyPair();
    const previous = generateEd25519KeyPair();
    const headers = signedHeaders({ id: ID, timestamp: TS, body: BODY, secret: current.secretKey, additionalSecrets: [previous.secretKey] });
    expect(Object.keys(headers).sort()).toEqual(['Content-Type', 'webhook-id', 'webhook-signature', 'webhook-timestamp']);
    expect(headers['webhook-signature'].split(' ').map((entry) => entry.slice(0, 4))).toEqual(['v1a,', 'v1a,']);
    for (const key of [current.publicKey, previous.publicKey]) expect(verifyStandard(BODY, headers, key, { now: TS }).id).toBe(ID);
    expect(() => verifyStandard(BODY, headers, generateEd25519KeyPair().publicKey, { now: TS })).toThrow('No matching signature found.');
    expect(() => verifyStandard(BODY, headers, 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', { now: TS })).toThrow('No matching signature found.');

    const hmac = signedHeaders({ id: ID, timestamp: TS, body: BODY, secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' });
    expect(() => verifyStandard(BODY, hmac, current.publicKey, { now: TS })).toThrow('No matching signature found.');
    expect(verifyStandard(BODY, hmac, [current.publicKey, 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'], { now: TS }).id).toBe(ID);
  });
});
