import { hash, randomBytes, timingSafeEqual } from 'node:crypto';

/** A new opaque bearer token: 32 random bytes, base64url (43 characters). Shown once, stored only as its hash. */
export function generateApiToken(): string {
  return randomBytes(32).toString('base64url');
}

/** The form stored in `users.api_token_hash`: lowercase hex sha256 of the token's UTF-8 bytes. */
export function hashApiToken(token: string): string {
  // The one-shot form: no Hash object per request.
  return hash('sha256', token, 'hex');
}

const NO_HASH = Buffer.alloc(32);

/** Compares two hex sha256 digests in constant time; a missing stored hash never matches. */
export function tokenHashesMatch(stored: string | null, given: string): boolean {
  const expected = stored ? Buffer.from(stored, 'hex') : NO_HASH;
  const actual = Buffer.from(given, 'hex');
  // Always run the comparison, so a missing user costs the same as a wrong token.
  return timingSafeEqual(expected.length === 32 ? expected : NO_HASH, actual) && stored !== null;
}
