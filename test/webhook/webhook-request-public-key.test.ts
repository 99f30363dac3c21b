import { createHmac } from 'node:crypto';
import {
  LogicError,
  WebhookRequest,
  deriveSecret,
  generateEd25519KeyPair,
  signHex,
  signStandard,
  signedHeaders,
  verifyHex,
} from '../../shared/webhook';

const BODY = '{"_data":{"user":{"id":42,"role":"admin"}},"_config":{"app.webhook.event":"user.updated","app.webhook.signable":1}}';
const { publicKey } = generateEd25519KeyPair();

/**
 * A `whpk_` key is public (docs/design.md §14.1: endpoints publish it for their receivers). Used as an
 * HMAC key it would let anyone forge X-Signature or `v1`, so every entry of the library that
 * takes a secret refuses it with LogicError (docs/design.md §8), as the receiver does.
 */
describe('a whpk_ public key where the library takes a secret', () => {
  it('when a verifier is given a whpk_ key, then setSecret throws LogicError and a signature forged with that key is never accepted', () => {
    const forged = createHmac('sha256', publicKey).update(BODY).digest('hex');
    const verifier = WebhookRequest.listen(forged, 'user.*');
    expect(() => verifier.setSecret(publicKey)).toThrow(LogicError);
    expect(() => verifier.setSecret(publicKey)).toThrow('A whpk_ key is an ed25519 public key: anyone holding it could forge an HMAC signature. Use the shared secret.');
    expect(() => verifier.unpack(null, BODY)).toThrow();
    expect(verifier.getSecret()).not.toBe(publicKey);
  });

  it('when a sender is given a whpk_ key by setSecret or sign, then both throw LogicError', () => {
    expect(() => new WebhookRequest('http://127.0.0.1:9/hook').setSecret(publicKey)).toThrow(LogicError);
    expect(() => new WebhookRequest('http://127.0.0.1:9/hook').sign(publicKey)).toThrow(LogicError);
  });

  it('when a whpk_ key is the app key a secret would be derived from, then the constructor and setDefaults throw LogicError', () => {
    expect(() => new WebhookRequest('http://127.0.0.1:9/hook', 'POST', 0, { appKey: publicKey })).toThrow(LogicError);
    expect(() => WebhookRequest.setDefaults({ appKey: publicKey })).toThrow(LogicError);
    expect(() => deriveSecret(publicKey, 'app.webhook.salt')).toThrow(LogicError);
  });

  it.each([
    ['signHex', () => signHex(BODY, publicKey)],
    ['verifyHex', () => verifyHex(BODY, publicKey, '00'.repeat(32))],
    ['signStandard', () => signStandard('msg_1', 1614265330, BODY, publicKey)],
    ['signedHeaders', () => signedHeaders({ id: 'msg_1', timestamp: 1614265330, body: BODY, secret: publicKey })],
    ['signedHeaders while rotating', () => signedHeaders({ id: 'msg_1', timestamp: 1614265330, body: BODY, secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', additionalSecrets: [publicKey] })],
  ])('when %s is given a whpk_ key as its secret, then it throws LogicError', (_name, call) => {
    expect(call).toThrow(LogicError);
  });
});
