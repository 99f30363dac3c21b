import { randomBytes } from 'node:crypto';
import { SCOPES } from './scopes';
import { InvalidScopesError } from './errors';

/**
 * The form of a service key (docs/design.md §4): `sk_` and at least 32 base64url characters. Generated
 * keys carry 32 random bytes (43 characters); the upper bound only keeps absurd headers out.
 */
export const SERVICE_KEY_FORMAT = /^sk_[A-Za-z0-9_-]{32,512}$/;

/** Every scope a key may be given: the named ones and `*` (all of them). */
export const GRANTABLE_SCOPES: readonly string[] = [...SCOPES, '*'];

/** A new service key: `sk_` + 32 random bytes in base64url. Shown once, stored only as its sha256. */
export function generateServiceKey(): string {
  return `sk_${randomBytes(32).toString('base64url')}`;
}

/**
 * Parses a comma-separated scope list (`webhooks:send,webhooks:read`), dropping blanks and
 * repeats, in the order given.
 *
 * @throws InvalidScopesError when it is empty or names a scope outside {@link GRANTABLE_SCOPES}
 */
export function parseScopes(list: string): string[] {
  const scopes = [...new Set(list.split(',').map((scope) => scope.trim()).filter(Boolean))];
  if (scopes.length === 0) throw new InvalidScopesError(`at least one scope is required (${GRANTABLE_SCOPES.join(', ')})`);
  const unknown = scopes.filter((scope) => !GRANTABLE_SCOPES.includes(scope));
  if (unknown.length > 0) {
    throw new InvalidScopesError(`unknown scope${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')} (known: ${GRANTABLE_SCOPES.join(', ')})`);
  }
  return scopes;
}
