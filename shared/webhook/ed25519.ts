import { KeyObject, createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify } from 'node:crypto';
import { LogicError } from './errors';

/** Prefix of an ed25519 private key (Standard Webhooks, as Svix writes it). */
export const ED25519_SECRET_PREFIX = 'whsk_';
/** Prefix of an ed25519 public key (Standard Webhooks). */
export const ED25519_PUBLIC_PREFIX = 'whpk_';

// DER headers that turn a raw 32-byte seed or public key into the PKCS#8 and SPKI forms Node's
// crypto reads (RFC 8410): the key's bytes follow them.
const PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');
const SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/** A key pair in the Standard Webhooks text forms. */
export interface Ed25519KeyPair {
  /** `whsk_` + base64 of 64 bytes: the seed, then the public key (as Svix emits). */
  secretKey: string;
  /** `whpk_` + base64 of the 32-byte public key. */
  publicKey: string;
}

/** A fresh ed25519 key pair (docs/design.md §14.1 `signature_scheme: "ed25519"`). */
export function generateEd25519KeyPair(): Ed25519KeyPair {
  const { privateKey } = generateKeyPairSync('ed25519');
  const seed = privateKey.export({ format: 'der', type: 'pkcs8' }).subarray(PKCS8_PREFIX.length);
  return keyPairOfSeed(seed);
}

/**
 * Reads a `whsk_` private key: base64 of the 32-byte seed, or of 64 bytes (seed, then public
 * key, as Svix writes it), whose public half must belong to the seed.
 *
 * @returns the key pair, the secret in its 64-byte form
 * @throws LogicError for another prefix, bad base64, another length or a mismatched public half
 */
export function parseEd25519SecretKey(secretKey: string): Ed25519KeyPair {
  const raw = decode(secretKey, ED25519_SECRET_PREFIX);
  if (raw.length !== 32 && raw.length !== 64) throw new LogicError('Invalid whsk_ key: expected base64 of 32 or 64 bytes.');
  const pair = keyPairOfSeed(raw.subarray(0, 32));
  if (raw.length === 64 && !raw.subarray(32).equals(decode(pair.publicKey, ED25519_PUBLIC_PREFIX))) {
    throw new LogicError('Invalid whsk_ key: its last 32 bytes are not the public key of its seed.');
  }
  return pair;
}

/** Whether a configured key is an ed25519 public key (`whpk_`), which verifies `v1a` signatures. */
export function isEd25519PublicKey(key: string): boolean {
  return key.startsWith(ED25519_PUBLIC_PREFIX);
}

/** Whether a stored signing key is an ed25519 private key (`whsk_`). */
export function isEd25519SecretKey(key: string): boolean {
  return key.startsWith(ED25519_SECRET_PREFIX);
}

/**
 * One Standard Webhooks asymmetric signature, `v1a,<base64 ed25519 signature>` over
 * `<id>.<timestamp>.<body>` (standardwebhooks.com, "Asymmetric signatures").
 *
 * @param timestampSeconds - unix time in whole seconds, as sent in `webhook-timestamp`
 * @param secretKey - `whsk_` (see {@link parseEd25519SecretKey})
 * @throws LogicError for a key that is not a valid `whsk_` key
 */
export function signStandardEd25519(id: string, timestampSeconds: number, body: string | Buffer, secretKey: string): string {
  const content = Buffer.concat([Buffer.from(`${id}.${timestampSeconds}.`, 'utf8'), typeof body === 'string' ? Buffer.from(body, 'utf8') : body]);
  return `v1a,${sign(null, content, privateKeyOf(secretKey)).toString('base64')}`;
}

/**
 * Whether `signature` (the base64 after `v1a,`) is `publicKey`'s ed25519 signature of
 * `<id>.<timestamp>.<body>`.
 *
 * @throws LogicError for a key that is not a valid `whpk_` key (configuration)
 */
export function verifyStandardEd25519(id: string, timestamp: number, body: string | Buffer, signature: string, publicKey: string): boolean {
  const given = BASE64.test(signature) ? Buffer.from(signature, 'base64') : null;
  if (!given || given.length !== 64) return false;
  const content = Buffer.concat([Buffer.from(`${id}.${timestamp}.`, 'utf8'), typeof body === 'string' ? Buffer.from(body, 'utf8') : body]);
  return verify(null, content, publicKeyOf(publicKey), given);
}

// Parsed keys by their text: a worker signs with the same few keys all day. Bounded, for safety.
const KEY_CACHE_LIMIT = 1_000;
const keyObjects = new Map<string, KeyObject>();

function cached(text: string, parse: () => KeyObject): KeyObject {
  const found = keyObjects.get(text);
  if (found) return found;
  const key = parse();
  if (keyObjects.size >= KEY_CACHE_LIMIT) keyObjects.clear();
  keyObjects.set(text, key);
  return key;
}

function privateKeyOf(secretKey: string): KeyObject {
  return cached(secretKey, () => {
    const seed = decode(parseEd25519SecretKey(secretKey).secretKey, ED25519_SECRET_PREFIX).subarray(0, 32);
    return createPrivateKey({ key: Buffer.concat([PKCS8_PREFIX, seed]), format: 'der', type: 'pkcs8' });
  });
}

function publicKeyOf(publicKey: string): KeyObject {
  return cached(publicKey, () => {
    const raw = decode(publicKey, ED25519_PUBLIC_PREFIX);
    if (raw.length !== 32) throw new LogicError('Invalid whpk_ key: expected base64 of 32 bytes.');
    return createPublicKey({ key: Buffer.concat([SPKI_PREFIX, raw]), format: 'der', type: 'spki' });
  });
}

function keyPairOfSeed(seed: Buffer): Ed25519KeyPair {
  const privateKey = createPrivateKey({ key: Buffer.concat([PKCS8_PREFIX, seed]), format: 'der', type: 'pkcs8' });
  const publicRaw = createPublicKey(privateKey).export({ format: 'der', type: 'spki' }).subarray(SPKI_PREFIX.length);
  return {
    secretKey: `${ED25519_SECRET_PREFIX}${Buffer.concat([seed, publicRaw]).toString('base64')}`,
    publicKey: `${ED25519_PUBLIC_PREFIX}${publicRaw.toString('base64')}`,
  };
}

function decode(text: string, prefix: string): Buffer {
  if (!text.startsWith(prefix)) throw new LogicError(`Invalid key: expected ${prefix} followed by base64.`);
  const encoded = text.slice(prefix.length);
  if (!BASE64.test(encoded)) throw new LogicError(`Invalid ${prefix} key: the part after ${prefix} must be base64.`);
  return Buffer.from(encoded, 'base64');
}
