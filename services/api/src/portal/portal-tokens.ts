import { randomBytes } from 'node:crypto';

/**
 * A portal link's token (docs/design.md §11.6): `pl_` + 32 random bytes in base64url (43 characters).
 * It travels in the link's URL fragment, is stored only as its sha256 and opens once.
 */
export const PORTAL_LINK_TOKEN_FORMAT = /^pl_[A-Za-z0-9_-]{43}$/;

/**
 * A portal session's token (docs/design.md §11.6): `ps_` + 32 random bytes in base64url, sent as
 * `Authorization: Bearer ps_...` with no user id header; stored only as its sha256.
 */
export const PORTAL_SESSION_FORMAT = /^ps_[A-Za-z0-9_-]{43}$/;

/** A new portal link token, shown once (in the link's URL). */
export function generatePortalLinkToken(): string {
  return `pl_${randomBytes(32).toString('base64url')}`;
}

/** A new portal session token, handed once to the page that opened the link. */
export function generatePortalSessionToken(): string {
  return `ps_${randomBytes(32).toString('base64url')}`;
}
