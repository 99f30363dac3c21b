import { KeyObject, createHmac, createSecretKey, timingSafeEqual } from 'node:crypto';
import { EncryptionError, LogicError } from './errors';
import { isEd25519PublicKey, isEd25519SecretKey, signStandardEd25519, verifyStandardEd25519 } from './ed25519';
import { uuidV7Bytes } from './ids';
import { RESERVED_HEADER_NAMES } from './reserved-headers';

export { EVENT_KEY, SIGN_KEY, parseEnvelope, serializeEnvelope } from './envelope';
export type { Envelope, EnvelopeConfig } from './envelope';

/** HMAC algorithms the `X-Signature` header may use (docs/design.md §7); anything else is refused. */
export const HMAC_ALGOS = ['sha256', 'sha384', 'sha512'] as const;
export type HmacAlgo = (typeof HMAC_ALGOS)[number];

/** Default name of the hex signature header (Luminova's `$xSignature`). */
export const DEFAULT_SIGNATURE_HEADER = 'X-Signature';
/** Default Standard Webhooks timestamp window, seconds, in both directions. */
export const DEFAULT_TOLERANCE_S = 300;

/** An HTTP header name: an RFC 9110 §5.6.2 token. */
const HEADER_TOKEN = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/;

/**
 * Checks a name for the hex signature header.
 * @returns the name unchanged
 * @throws LogicError when it is not an HTTP token (RFC 9110) or is one of
 *   {@link RESERVED_HEADER_NAMES}, in any case
 */
export function assertSignatureHeaderName(name: string): string {
  if (!HEADER_TOKEN.test(name)) throw new LogicError(`Invalid signature header name "${name}": not an HTTP header token.`);
  if (RESERVED_HEADER_NAMES.has(name.toLowerCase())) {
    throw new LogicError(`Invalid signature header name "${name}": it is a reserved header.`);
  }
  return name;
}

/** Incoming headers as Node and Fastify give them (any case is accepted). */
export type IncomingHeaders = Record<string, string | string[] | number | undefined>;

const SECRET_PREFIX = 'whsec_';
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const HEX_LENGTH: Record<HmacAlgo, number> = { sha256: 64, sha384: 96, sha512: 128 };

/**
 * Checks an algorithm name.
 * @throws LogicError naming the supported algorithms when `algo` is not one of them
 */
export function assertAlgo(algo: string): HmacAlgo {
  if ((HMAC_ALGOS as readonly string[]).includes(algo)) return algo as HmacAlgo;
  throw new LogicError(`Unsupported HMAC algorithm "${algo}": use one of ${HMAC_ALGOS.join(', ')}.`);
}

/**
 * Refuses a `whpk_` ed25519 public key where an HMAC key is expected: endpoints publish it for
 * their receivers, so a signature keyed with it is one anyone can forge (docs/design.md §8, §14.1).
 *
 * @throws LogicError when `secret` is a `whpk_` key
 */
export function assertSharedSecret(secret: string): void {
  if (isEd25519PublicKey(secret)) {
    throw new LogicError('A whpk_ key is an ed25519 public key: anyone holding it could forge an HMAC signature. Use the shared secret.');
  }
}

/**
 * The `X-Signature` value: lowercase hex HMAC-<algo> (RFC 2104) with key = the secret's UTF-8
 * bytes (a `whsec_` secret included, prefix and all) and message = the body bytes (docs/design.md §7,
 * Luminova `hash_hmac($algo, $body, $secret)`).
 *
 * @param body - the exact bytes sent; a string is taken as UTF-8
 * @throws LogicError for an empty secret, a `whpk_` public key or an unsupported algorithm
 */
export function signHex(body: string | Buffer, secret: string, algo: HmacAlgo = 'sha256'): string {
  return hexDigest(body, secret, assertAlgo(algo));
}

/**
 * Verifies an `X-Signature` value in constant time; hex case does not matter. Never throws on
 * what came over the wire: a missing, non-string, non-hex or wrong-length signature is false.
 *
 * @param body - the raw bytes that arrived, never re-serialised JSON
 * @throws LogicError only for an empty secret, a `whpk_` public key or an unsupported algorithm
 *   (configuration)
 */
export function verifyHex(body: string | Buffer, secret: string, signature: unknown, algo: HmacAlgo = 'sha256'): boolean {
  const checked = assertAlgo(algo);
  const expected = Buffer.from(hexDigest(body, secret, checked), 'hex');
  if (typeof signature !== 'string') return false;
  const given = signature.trim();
  if (given.length !== HEX_LENGTH[checked] || !/^[0-9a-fA-F]+$/.test(given)) return false;
  return timingSafeEqual(expected, Buffer.from(given, 'hex'));
}

/**
 * One Standard Webhooks signature, `v1,<base64 HMAC-SHA256>` over `<id>.<timestamp>.<body>`
 * (standardwebhooks.com; the reference `Webhook.sign()`).
 *
 * @param timestampSeconds - unix time in whole seconds, as sent in `webhook-timestamp`
 * @param secret - `whsec_<base64>` (the base64 part is the key) or any other string (its UTF-8
 *   bytes are the key)
 * @throws LogicError for an empty or badly encoded secret, a `whpk_` public key or a
 *   non-integer timestamp
 */
export function signStandard(id: string, timestampSeconds: number, body: string | Buffer, secret: string): string {
  assertTimestamp(timestampSeconds);
  return standardSignature(id, timestampSeconds, body, standardKey(secret));
}

/** Options of {@link verifyStandard}. */
export interface VerifyStandardOptions {
  /** Accepted clock difference in seconds, both directions; default 300. */
  toleranceS?: number;
  /** The current unix time in seconds; default the clock. Tests inject it. */
  now?: number;
}

/**
 * Verifies Standard Webhooks headers over the raw body: the `webhook-signature` list is
 * space-separated, `v1` entries are checked against the shared secrets (constant-time) and
 * `v1a` entries against the `whpk_` ed25519 public keys (docs/design.md §14.1), other versions are
 * ignored, one match is enough, and `webhook-timestamp` must lie within the tolerance.
 *
 * @param headers - incoming headers holding `webhook-id`, `webhook-timestamp`, `webhook-signature`
 * @param secret - the shared secret or `whpk_` public key, or several while one rotates
 * @returns the verified webhook-id and timestamp (seconds)
 * @throws EncryptionError naming the reason: missing headers, bad or stale timestamp, no match
 * @throws LogicError for an empty or badly encoded secret (configuration)
 */
export function verifyStandard(
  body: string | Buffer,
  headers: IncomingHeaders,
  secret: string | readonly string[],
  options: VerifyStandardOptions = {},
): { id: string; timestamp: number } {
  const id = header(headers, 'webhook-id');
  const rawTimestamp = header(headers, 'webhook-timestamp');
  const signatures = header(headers, 'webhook-signature');
  if (!id || !rawTimestamp || !signatures) throw new EncryptionError('Missing required Standard Webhooks headers.');
  const timestamp = /^\d{1,15}$/.test(rawTimestamp) ? Number(rawTimestamp) : NaN;
  if (Number.isNaN(timestamp)) throw new EncryptionError('Invalid webhook-timestamp header.');
  const tolerance = options.toleranceS ?? DEFAULT_TOLERANCE_S;
  const now = options.now ?? Math.floor(Date.now() / 1000);
  if (now - timestamp > tolerance) throw new EncryptionError('Message timestamp too old.');
  if (timestamp - now > tolerance) throw new EncryptionError('Message timestamp too new.');

  const expected: Buffer[] = [];
  const publicKeys: string[] = [];
  for (const one of typeof secret === 'string' ? [secret] : secret) {
    if (isEd25519PublicKey(one)) publicKeys.push(one);
    else expected.push(Buffer.from(standardDigest(id, timestamp, body, standardKey(one))));
  }
  // A plain scan of the space-separated list: this runs on every webhook a receiver takes.
  for (let start = 0; start < signatures.length; ) {
    const space = signatures.indexOf(' ', start);
    const end = space < 0 ? signatures.length : space;
    if (signatures.startsWith('v1,', start)) {
      const given = Buffer.from(signatures.slice(start + 3, end));
      for (const candidate of expected) {
        if (candidate.length === given.length && timingSafeEqual(candidate, given)) return { id, timestamp };
      }
    } else if (publicKeys.length > 0 && signatures.startsWith('v1a,', start)) {
      const given = signatures.slice(start + 4, end);
      for (const publicKey of publicKeys) {
        if (verifyStandardEd25519(id, timestamp, body, given, publicKey)) return { id, timestamp };
      }
    }
    start = end + 1;
  }
  throw new EncryptionError('No matching signature found.');
}

/** Input of {@link signedHeaders}. */
export interface SignedHeadersInput {
  /** The webhook-id, stable across retries of one delivery. */
  id: string;
  /** Unix seconds of this attempt. */
  timestamp: number;
  /** The exact body bytes that will be sent. */
  body: string | Buffer;
  /** A shared secret, or a `whsk_` ed25519 private key. */
  secret: string;
  /** While a secret rotates: more secrets whose signatures are appended to the list. */
  additionalSecrets?: readonly string[];
  algo?: HmacAlgo;
  /** Name of the hex signature header; default `X-Signature`. */
  signatureHeader?: string;
}

/**
 * Every header docs/design.md §7 puts on a delivery: `Content-Type: application/json`, the hex
 * signature header, `webhook-id`, `webhook-timestamp` and `webhook-signature`. The body is
 * hashed as it is (a string as UTF-8, never copied), once per HMAC. A `whsk_` secret signs
 * `v1a` (ed25519, docs/design.md §14.1) instead of `v1`, and without the hex header when it is the
 * current secret.
 *
 * @throws LogicError for an empty or badly encoded secret, a `whpk_` public key (which only
 *   verifies), an unsupported algorithm or a non-integer timestamp
 */
export function signedHeaders(input: SignedHeadersInput): Record<string, string> {
  const algo = assertAlgo(input.algo ?? 'sha256');
  assertTimestamp(input.timestamp);
  const { body, id, timestamp } = input;
  const secrets = [input.secret, ...(input.additionalSecrets ?? [])];
  const signatures = secrets
    .map((s) => (isEd25519SecretKey(s) ? signStandardEd25519(id, timestamp, body, s) : standardSignature(id, timestamp, body, standardKey(s))))
    .join(' ');
  // The hex header needs a shared secret: an ed25519 endpoint's deliveries carry none (docs/design.md §14.1).
  if (isEd25519SecretKey(input.secret)) {
    return { 'Content-Type': 'application/json', 'webhook-id': id, 'webhook-timestamp': String(timestamp), 'webhook-signature': signatures };
  }
  return {
    'Content-Type': 'application/json',
    [input.signatureHeader ?? DEFAULT_SIGNATURE_HEADER]: hexDigest(body, input.secret, algo),
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signatures,
  };
}

/**
 * The secret used when none was set: lowercase hex HMAC-<algo>(key = appKey, message = salt),
 * as Luminova's `hash_hmac($algo, $salt, env('app.key'))` (docs/design.md §8).
 *
 * @throws LogicError for an empty app key, a `whpk_` public key (the derived secret would be
 *   anyone's) or an unsupported algorithm
 */
export function deriveSecret(appKey: string, salt: string, algo: HmacAlgo = 'sha256'): string {
  if (!appKey) throw new LogicError('Cannot derive a webhook secret: the application key is empty.');
  assertSharedSecret(appKey);
  return createHmac(assertAlgo(algo), appKey).update(salt, 'utf8').digest('hex');
}

/**
 * A fresh webhook-id: `msg_` and 22 base64url characters of a UUIDv7 (docs/design.md §3.3: time-ordered,
 * 74 random bits). It never contains `:` and is never all digits, so it is also a valid BullMQ
 * job id.
 */
export function newWebhookId(): string {
  return `msg_${uuidV7Bytes().toString('base64url')}`;
}

// A string body is hashed as UTF-8 straight from the string: no Buffer copy per signature.
function hexDigest(body: string | Buffer, secret: string, algo: HmacAlgo): string {
  if (!secret) throw new LogicError('Cannot sign: the secret is empty.');
  assertSharedSecret(secret);
  return createHmac(algo, secret).update(body).digest('hex');
}

function standardSignature(id: string, timestamp: number, body: string | Buffer, key: KeyObject): string {
  return `v1,${standardDigest(id, timestamp, body, key)}`;
}

function standardDigest(id: string, timestamp: number, body: string | Buffer, key: KeyObject): string {
  return createHmac('sha256', key).update(`${id}.${timestamp}.`, 'utf8').update(body).digest('base64');
}

// Decoded keys by secret: a worker signs with the same few secrets all day, and checking and
// decoding the base64 each time costs more than a small body's HMAC. Kept as KeyObjects: Node 24
// takes several times as long to key an HMAC with a Buffer as with a KeyObject (Node 22 half as
// long again), longer than hashing a 2 KB body. Bounded, for safety.
const KEY_CACHE_LIMIT = 1_000;
const standardKeys = new Map<string, KeyObject>();

function standardKey(secret: string): KeyObject {
  const cached = standardKeys.get(secret);
  if (cached) return cached;
  const key = createSecretKey(decodeStandardKey(secret));
  if (standardKeys.size >= KEY_CACHE_LIMIT) standardKeys.clear();
  standardKeys.set(secret, key);
  return key;
}

function decodeStandardKey(secret: string): Buffer {
  assertSharedSecret(secret);
  if (!secret.startsWith(SECRET_PREFIX)) {
    if (!secret) throw new LogicError('Cannot sign: the secret is empty.');
    return Buffer.from(secret, 'utf8');
  }
  const encoded = secret.slice(SECRET_PREFIX.length);
  if (!encoded || !BASE64.test(encoded)) throw new LogicError('Invalid secret: the part after whsec_ must be base64.');
  return Buffer.from(encoded, 'base64');
}

function assertTimestamp(seconds: number): void {
  if (!Number.isSafeInteger(seconds) || seconds < 0) {
    throw new LogicError(`Invalid webhook timestamp ${seconds}: expected whole unix seconds.`);
  }
}

function header(headers: IncomingHeaders, name: string): string | undefined {
  // Node and Fastify give lowercase names: look there first, scan only for other sources.
  const value = name in headers ? headers[name] : Object.entries(headers).find(([key]) => key.toLowerCase() === name)?.[1];
  if (Array.isArray(value)) return value.join(' ');
  return value === undefined ? undefined : String(value);
}
