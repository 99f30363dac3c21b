import { EncryptionError, LogicError, WebhookRequest, deriveSecret, serializeEnvelope, signHex } from '../../shared/webhook';
import { reasonOf } from './support/reason-of';

const SECRET = 'your-shared-secret';
const GOLDEN_BODY =
  '{"_data":{"status":"OK","user":{"id":42,"email":"user@example.com"}},"_config":{"app.webhook.event":"user.registered","app.webhook.signable":1}}';
const GOLDEN_SIGNATURE = '7a578c485cdeedd8e4f2ebf78d8e944abd81ef08cacff81f53e4104f539ac9a0';
const GOLDEN_DATA = { status: 'OK', user: { id: 42, email: 'user@example.com' } };

describe('WebhookRequest.listen / unpack / isSignature', () => {
  it('when the golden webhook arrives as bytes or text, then unpack returns _data', () => {
    const verifier = WebhookRequest.listen(GOLDEN_SIGNATURE, 'user.registered').setSecret(SECRET);
    expect(verifier.unpack(null, Buffer.from(GOLDEN_BODY))).toEqual(GOLDEN_DATA);
    expect(verifier.unpack(undefined, GOLDEN_BODY)).toEqual(GOLDEN_DATA);
    expect(verifier.isSignature(GOLDEN_BODY)).toBe(true);
  });

  it('when a callback is given, then its result is returned', () => {
    const result = WebhookRequest.listen(GOLDEN_SIGNATURE.toUpperCase()).setSecret(SECRET).unpack((data) => (data as typeof GOLDEN_DATA).user.id, GOLDEN_BODY);
    expect(result).toBe(42);
  });

  it('when the body was already parsed (Luminova style), then it is re-encoded as PHP would and verified', () => {
    expect(WebhookRequest.listen(GOLDEN_SIGNATURE).setSecret(SECRET).unpack(null, JSON.parse(GOLDEN_BODY))).toEqual(GOLDEN_DATA);
  });

  it('when the sender formatted its JSON differently, then the raw bytes verify and the re-encoded object does not', () => {
    const spaced = GOLDEN_BODY.replace('{"_data":', '{"_data": ');
    const signature = signHex(spaced, SECRET);
    expect(WebhookRequest.listen(signature).setSecret(SECRET).isSignature(Buffer.from(spaced))).toBe(true);
    expect(WebhookRequest.listen(signature).setSecret(SECRET).isSignature(JSON.parse(spaced))).toBe(false);
  });

  it.each([
    ['the body is tampered with', GOLDEN_SIGNATURE, GOLDEN_BODY.replace('42', '43'), null, /Signature mismatch/],
    ['the signature header is missing', undefined, GOLDEN_BODY, null, /^EncryptionError: Missing X-Signature signature/],
    ['the signature header is empty', '', GOLDEN_BODY, null, /Missing X-Signature/],
    ['the signature is not hex', 'not-hex', GOLDEN_BODY, null, /Signature mismatch/],
    ['the body is empty', GOLDEN_SIGNATURE, '', null, /No request data/],
    ['the event is another one', GOLDEN_SIGNATURE, GOLDEN_BODY, 'user.deleted', /Event "user.registered" is not accepted/],
    ['the event family is another one', GOLDEN_SIGNATURE, GOLDEN_BODY, 'post.*', /is not accepted/],
  ])('when %s, then EncryptionError and isSignature is false', (_name, signature, body, event, reason) => {
    const verifier = WebhookRequest.listen(signature, event).setSecret(SECRET);
    expect(reasonOf(() => verifier.unpack(null, body))).toMatch(reason);
    expect(reasonOf(() => verifier.unpack(null, body))).toMatch(/^EncryptionError: /);
    expect(verifier.isSignature(body)).toBe(false);
  });

  it('when the event pattern is a family wildcard, then a matching event passes', () => {
    expect(WebhookRequest.listen(GOLDEN_SIGNATURE, 'user.*').setSecret(SECRET).isSignature(GOLDEN_BODY)).toBe(true);
  });

  it('when a correctly signed body lacks the signable flag, then it is refused (Luminova accepted it)', () => {
    const unsigned = serializeEnvelope(GOLDEN_DATA, { event: 'user.registered' });
    const verifier = WebhookRequest.listen(signHex(unsigned, SECRET)).setSecret(SECRET);
    expect(reasonOf(() => verifier.unpack(null, unsigned))).toMatch(/^EncryptionError: Payload is not marked signable/);
  });

  it('when a correctly signed body is not an envelope, then it is refused', () => {
    const body = '{"status":"OK"}';
    expect(reasonOf(() => WebhookRequest.listen(signHex(body, SECRET)).setSecret(SECRET).unpack(null, body))).toMatch(/_data key is missing/);
  });

  it('when the algorithm is sha384 on both sides, then it verifies, and the sha256 signature does not', () => {
    const verifier = WebhookRequest.listen(signHex(GOLDEN_BODY, SECRET, 'sha384')).setSecret(SECRET).setAlgo('sha384');
    expect(verifier.isSignature(GOLDEN_BODY)).toBe(true);
    expect(WebhookRequest.listen(GOLDEN_SIGNATURE).setSecret(SECRET).setAlgo('sha384').isSignature(GOLDEN_BODY)).toBe(false);
  });

  it('when no secret is set on either side, then both derive the same one from the app key and salt', () => {
    WebhookRequest.setDefaults({ appKey: 'shared-app-key-0123', salt: 'app.webhook.salt' });
    try {
      const derived = deriveSecret('shared-app-key-0123', 'app.webhook.salt');
      const verifier = WebhookRequest.listen(signHex(GOLDEN_BODY, derived));
      expect(verifier.unpack(null, GOLDEN_BODY)).toEqual(GOLDEN_DATA);
      expect(verifier.getSecret()).toBe(derived);
    } finally {
      WebhookRequest.setDefaults({});
    }
  });

  it('when unpack or isSignature is called on an instance not made by listen(), then LogicError', () => {
    const sender = new WebhookRequest('http://127.0.0.1:9/').setSecret(SECRET);
    expect(reasonOf(() => sender.unpack(null, GOLDEN_BODY))).toMatch(/^LogicError: Cannot unpack: call WebhookRequest.listen\(\) first/);
    expect(() => sender.isSignature(GOLDEN_BODY)).toThrow(LogicError);
  });

  it('when a listening instance is asked to send, then LogicError', async () => {
    await expect(WebhookRequest.listen(GOLDEN_SIGNATURE).send()).rejects.toBeInstanceOf(LogicError);
  });

  it('when the error classes are thrown, then they keep their names and causes', () => {
    const cause = new Error('inner');
    const error = new EncryptionError('outer', { cause });
    expect(error.name).toBe('EncryptionError');
    expect(error.cause).toBe(cause);
  });
});
