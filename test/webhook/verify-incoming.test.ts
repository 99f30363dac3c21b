import { createHash } from 'node:crypto';
import { EncryptionError, matchesEvent, serializeEnvelope, signedHeaders, verifyIncoming } from '../../shared/webhook';
import { reasonOf } from './support/reason-of';

const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const NOW = 1_700_000_000;
const body = Buffer.from(serializeEnvelope({ user_id: 7 }, { event: 'user.created', signable: true }));

function headersFor(bytes: Buffer, timestamp = NOW): Record<string, string> {
  return signedHeaders({ id: 'msg_abc', timestamp, body: bytes, secret: SECRET });
}

describe('matchesEvent', () => {
  it.each([
    [null, 'user.created', true],
    [null, null, true],
    ['user.created', 'user.created', true],
    ['user.created', 'user.deleted', false],
    ['user.*', 'user.created', true],
    ['user.*', 'user.a.b', true],
    ['user.*', 'user.', false],
    ['user.*', 'users.created', false],
    ['user.*', 'user', false],
    ['user.*', null, false],
  ])('pattern %p and event %p: %p', (pattern, event, expected) => {
    expect(matchesEvent(pattern, event)).toBe(expected);
  });
});

describe('verifyIncoming', () => {
  const policy = { secret: SECRET, now: NOW, event: 'user.*' };

  it('when Standard Webhooks headers are present, then they decide and the webhook-id is the id', () => {
    const headers = { ...headersFor(body), 'X-Signature': 'ignored-when-standard-headers-exist' };
    expect(verifyIncoming(body, headers, policy)).toEqual({
      id: 'msg_abc',
      scheme: 'standard-webhooks',
      bodySha256: createHash('sha256').update(body).digest('hex'),
      data: { user_id: 7 },
      event: 'user.created',
      signable: true,
    });
  });

  it('when only a valid X-Signature is present and the policy is the default, then it is refused for want of the Standard Webhooks headers', () => {
    const { 'X-Signature': signature } = headersFor(body);
    expect(reasonOf(() => verifyIncoming(body, { 'x-signature': signature }, policy))).toMatch(/Missing required Standard Webhooks headers/);
  });

  it('when the policy accepts X-Signature only and only X-Signature is present, then it decides and the id is the sha256 of the body', () => {
    const { 'X-Signature': signature } = headersFor(body);
    const result = verifyIncoming(body, { 'x-signature': signature }, { ...policy, acceptXSignatureOnly: true });
    expect(result.scheme).toBe('x-signature');
    expect(result.id).toBe(createHash('sha256').update(body).digest('hex'));
    expect(result.bodySha256).toBe(result.id);
  });

  it('when the policy accepts X-Signature only but one Standard Webhooks header is present, then the Standard Webhooks rules still decide', () => {
    const { 'X-Signature': signature, 'webhook-id': id } = headersFor(body);
    const headers = { 'x-signature': signature, 'webhook-id': id };
    expect(reasonOf(() => verifyIncoming(body, headers, { ...policy, acceptXSignatureOnly: true }))).toMatch(/Missing required Standard Webhooks headers/);
  });

  it('when one Standard Webhooks header is missing, then it fails instead of falling back', () => {
    const { 'webhook-signature': _dropped, ...headers } = headersFor(body);
    expect(reasonOf(() => verifyIncoming(body, headers, policy))).toMatch(/Missing required Standard Webhooks headers/);
  });

  it('when the timestamp is outside the tolerance, then it fails', () => {
    expect(reasonOf(() => verifyIncoming(body, headersFor(body, NOW - 61), { ...policy, toleranceS: 60 }))).toMatch(/too old/);
  });

  it('when no signature header is present at all, then a clean EncryptionError', () => {
    expect(() => verifyIncoming(body, { 'content-type': 'application/json' }, policy)).toThrow(EncryptionError);
    expect(reasonOf(() => verifyIncoming(body, {}, policy))).toMatch(/Missing required Standard Webhooks headers/);
    expect(reasonOf(() => verifyIncoming(body, {}, { ...policy, acceptXSignatureOnly: true }))).toBe('EncryptionError: Missing x-signature header.');
  });

  it('when the event is outside the accepted family, then it fails after the signature passed', () => {
    expect(reasonOf(() => verifyIncoming(body, headersFor(body), { ...policy, event: 'post.*' }))).toMatch(/not accepted/);
  });

  it('when the secret rotates, then any of the configured secrets verifies X-Signature', () => {
    const { 'X-Signature': signature } = headersFor(body);
    const rotating = { ...policy, secret: ['whsec_b2xk', SECRET], acceptXSignatureOnly: true };
    expect(verifyIncoming(body, { 'X-Signature': signature }, rotating).data).toEqual({ user_id: 7 });
  });
});
