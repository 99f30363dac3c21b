import { randomBytes } from 'node:crypto';
import type { WebhookEndpoint } from '../../db';
import { maskedQueryNames, maskedUrl } from '../../http/url-display';
import { Ed25519KeyPair, generateEd25519KeyPair, isEd25519PublicKey, isEd25519SecretKey, parseEd25519SecretKey } from '../../webhook/ed25519';
import { signStandard } from '../../webhook/signing';
import { InvalidEndpointError } from '../errors';
import { maskedAuthKept } from './auth';
import { maskedKeyKept } from './client-certificate';
import { maskedHeadersKept } from './headers';
import { originOf } from './origin';
import type { EndpointChanges } from './changes';
import type { SignatureScheme } from './view';

/** `whsec_` + base64 of 32 random bytes (docs/design.md §3: 24..64), the Standard Webhooks secret format. */
export function generateEndpointSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/**
 * @throws InvalidEndpointError for a secret the worker could not sign with (whsec_ + bad base64),
 *   or one that looks like an ed25519 key (`whsk_`, `whpk_`), which an HMAC endpoint cannot use
 */
export function assertEndpointSecret(secret: string): void {
  if (isEd25519SecretKey(secret) || isEd25519PublicKey(secret)) {
    throw new InvalidEndpointError('secret: a whsk_ or whpk_ key needs signature_scheme "ed25519".');
  }
  try {
    signStandard('check', 0, '', secret);
  } catch (error) {
    throw new InvalidEndpointError('Invalid secret: use whsec_ followed by base64, or any other non-empty string.', { cause: error });
  }
}

/**
 * The key pair an ed25519 endpoint signs with: the operator's own `whsk_` key (32-byte seed or
 * 64 bytes seed and public key), or a fresh pair.
 *
 * @throws InvalidEndpointError for anything but a valid `whsk_` key
 */
function ed25519KeyPair(secret: string | undefined): Ed25519KeyPair {
  if (secret === undefined) return generateEd25519KeyPair();
  try {
    return parseEd25519SecretKey(secret);
  } catch (error) {
    throw new InvalidEndpointError(`secret: an ed25519 endpoint takes a whsk_ private key (base64 of 32 or 64 bytes). ${(error as Error).message}`, {
      cause: error,
    });
  }
}

/** The key material of a new or rotated endpoint key: what is stored, and what is shown once. */
export function signingKey(scheme: SignatureScheme, given: string | undefined): { secret: string; publicKey: string | null; shown: string } {
  if (scheme === 'ed25519') {
    const pair = ed25519KeyPair(given);
    return { secret: pair.secretKey, publicKey: pair.publicKey, shown: pair.publicKey };
  }
  const secret = given ?? generateEndpointSecret();
  assertEndpointSecret(secret);
  return { secret, publicKey: null, shown: secret };
}

/**
 * The stored credentials a change carries over without giving them again, each named as a
 * 400 names it (`headers.authorization`). One entry per kind of masked credential (docs/design.md
 * §14.3): masked headers, the OAuth2 client secret, a client certificate's key.
 */
const MASKED_CREDENTIALS: readonly ((row: WebhookEndpoint, changes: EndpointChanges) => string[])[] = [
  (row, changes) => maskedHeadersKept(row.headers ?? {}, changes.headers),
  (row, changes) => maskedAuthKept(row.auth, changes.auth),
  (row, changes) => maskedKeyKept(row.clientKey, changes.clientCertificate),
  (row, changes) => maskedQueryKept(row.url, changes.url),
];

/** Stored sensitive query values of the URL that a new URL gives as `********`. */
function maskedQueryKept(stored: string, given: string | undefined): string[] {
  if (given === undefined) return [];
  const storedMasked = new Set(maskedQueryNames(maskedUrl(stored)));
  return [...new Set(maskedQueryNames(given))].filter((name) => storedMasked.has(name)).map((name) => `url query parameter ${name}`);
}

/**
 * docs/design.md §14.3: a move of `url` to another origin (scheme, host and port, as the URL
 * standard compares them) keeps no stored masked credential: whoever changes the URL may not
 * know them, and must not be able to read them at a host of their choosing. A change of path
 * on the same origin keeps them.
 *
 * @throws InvalidEndpointError naming every masked credential the change would carry over
 */
export function assertCredentialsGivenAgain(row: WebhookEndpoint, url: string, changes: EndpointChanges): void {
  if (originOf(url) === originOf(row.url)) return;
  const carried = MASKED_CREDENTIALS.flatMap((kept) => kept(row, changes));
  if (carried.length === 0) return;
  throw new InvalidEndpointError(
    `url: moving to another origin needs the masked credentials given again in the same PATCH: ${carried.join(', ')}. Send their values, or leave them out.`,
  );
}
