import { createHash } from 'node:crypto';
import { type Envelope, parseEnvelope } from './envelope';
import { isEd25519PublicKey } from './ed25519';
import { EncryptionError } from './errors';
import {
  DEFAULT_SIGNATURE_HEADER,
  type HmacAlgo,
  type IncomingHeaders,
  type VerifyStandardOptions,
  verifyHex,
  verifyStandard,
} from './signing';

/**
 * Whether an event name is accepted. `pattern` is an exact name (`user.created`) or a prefix
 * wildcard (`user.*` accepts `user.created` and `user.a.b`, not `user` nor `users.x`). A null
 * or undefined pattern accepts any event, including none.
 */
export function matchesEvent(pattern: string | null | undefined, event: string | null): boolean {
  if (!pattern) return true;
  if (event === null) return false;
  if (pattern.endsWith('.*')) return event.startsWith(pattern.slice(0, -1)) && event.length > pattern.length - 1;
  return event === pattern;
}

/**
 * Parses bytes whose signature already verified and applies the receiving rules Luminova got
 * wrong (docs/design.md §10): an envelope without `"app.webhook.signable":1` is refused, and the event
 * check, when a pattern is given, really compares `_config["app.webhook.event"]`.
 *
 * @throws EncryptionError when the body is not an envelope, is not marked signable, or carries
 *   an event the pattern refuses
 */
export function acceptEnvelope(body: string | Buffer, eventPattern?: string | null): Envelope {
  const envelope = parseEnvelope(body);
  if (!envelope.signable) throw new EncryptionError('Payload is not marked signable (app.webhook.signable).');
  if (!matchesEvent(eventPattern, envelope.event)) {
    throw new EncryptionError(`Event ${JSON.stringify(envelope.event)} is not accepted here (expected ${eventPattern}).`);
  }
  return envelope;
}

/** What a receiver accepts: its secret(s) and its rules. */
export interface IncomingPolicy extends VerifyStandardOptions {
  /** The shared secret, or several while one rotates; any of them may match. */
  secret: string | readonly string[];
  /** Algorithm of the hex signature header; default sha256. */
  algo?: HmacAlgo;
  /** Name of the hex signature header; default `X-Signature`. */
  signatureHeader?: string;
  /** Accepted events (see {@link matchesEvent}); null accepts any. */
  event?: string | null;
  /**
   * Accept a webhook that carries only the hex signature header (senders such as Luminova,
   * which have no Standard Webhooks headers). Default false: the Standard Webhooks headers are
   * required, because the hex signature carries no timestamp, so a captured delivery with its
   * `webhook-*` headers stripped would verify forever (docs/design.md §8). A caller that turns this on
   * must dedupe by {@link VerifiedWebhook.bodySha256} for every accepted webhook.
   */
  acceptXSignatureOnly?: boolean;
}

/** A verified webhook, ready for its handler. */
export interface VerifiedWebhook extends Envelope {
  /** The `webhook-id` header when signed with Standard Webhooks, else the sha256 hex of the body. */
  id: string;
  scheme: 'standard-webhooks' | 'x-signature';
  /** Lowercase hex sha256 of the raw body, whichever scheme verified it. */
  bodySha256: string;
}

/**
 * Verifies an incoming webhook over its raw bytes (docs/design.md §8): with the Standard
 * Webhooks headers (standardwebhooks.com), which are required, so the timestamp window
 * always applies; then {@link acceptEnvelope}. With `policy.acceptXSignatureOnly`, a webhook
 * without any `webhook-*` header is verified with the hex signature header instead
 * (Luminova's scheme); one with any of them is still held to the Standard Webhooks rules.
 *
 * @param body - the bytes exactly as they arrived
 * @throws EncryptionError naming the reason (missing header, mismatch, stale, not signable, event)
 */
export function verifyIncoming(body: Buffer, headers: IncomingHeaders, policy: IncomingPolicy): VerifiedWebhook {
  const secrets = typeof policy.secret === 'string' ? [policy.secret] : policy.secret;
  const lower = new Set(Object.keys(headers).map((name) => name.toLowerCase()));
  let id: string;
  let scheme: VerifiedWebhook['scheme'];
  const bodySha256 = createHash('sha256').update(body).digest('hex');
  if (lower.has('webhook-id') || lower.has('webhook-timestamp') || lower.has('webhook-signature') || !policy.acceptXSignatureOnly) {
    id = verifyStandard(body, headers, secrets, policy).id;
    scheme = 'standard-webhooks';
  } else {
    const name = (policy.signatureHeader ?? DEFAULT_SIGNATURE_HEADER).toLowerCase();
    const entry = Object.entries(headers).find(([key]) => key.toLowerCase() === name);
    const signature = entry?.[1];
    if (typeof signature !== 'string' || signature === '') throw new EncryptionError(`Missing ${name} header.`);
    // A whpk_ key is public: used as an HMAC key it would let anyone forge X-Signature.
    if (!secrets.some((secret) => !isEd25519PublicKey(secret) && verifyHex(body, secret, signature, policy.algo))) {
      throw new EncryptionError('Signature mismatch: the payload may have been tampered with.');
    }
    id = bodySha256;
    scheme = 'x-signature';
  }
  return { id, scheme, bodySha256, ...acceptEnvelope(body, policy.event) };
}
