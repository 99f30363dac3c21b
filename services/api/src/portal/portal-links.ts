import { ForeignKeyConstraintError, QueryTypes, Sequelize } from 'sequelize';
import type { PortalScope } from '../../../../shared/db';
import { decodeCursor, Page, toPage } from '../../../../shared/operations/cursor';
import { InvalidCursorError } from '../../../../shared/operations/errors';
import { hashApiToken } from '../users/api-token';
import { PortalUserNotFoundError } from './errors';
import { generatePortalLinkToken, generatePortalSessionToken } from './portal-tokens';

/** Where the portal page is served; a link is `<APP_URL>/portal#token=<token>`. */
export const PORTAL_PATH = '/portal';

/** Bounds and defaults of a link (docs/design.md §11.6): both lifetimes 60..86400 s, default 3600; scope default manage. */
export const PORTAL_LINK_LIMITS = { minTtlS: 60, maxTtlS: 86_400, defaultTtlS: 3_600, defaultSessionTtlS: 3_600, defaultScope: 'manage' } as const;

/** What a link is minted for. */
export interface PortalLinkRequest {
  userId: number;
  scope: PortalScope;
  /** How long the link can be opened, seconds. */
  ttlS: number;
  /** How long the session it opens lasts from the exchange, seconds. */
  sessionTtlS: number;
  /** The service key minting it; null from the CLI. */
  createdByKeyId: number | null;
}

/** A new link as `POST /api/v1/portal-links` answers it: the only place its token appears. */
export interface MintedPortalLink {
  id: number;
  /** `<APP_URL>/portal#token=<token>`: in the fragment, so it reaches no server log. */
  url: string;
  /** ISO 8601. */
  expires_at: string;
}

/** A link as listed: its state, never its token. Times ISO 8601. */
export interface PortalLinkView {
  id: number;
  user_id: number;
  scope: PortalScope;
  session_ttl_s: number;
  expires_at: string;
  used_at: string | null;
  revoked_at: string | null;
  created_at: string;
}

/** The session a link opened, as `POST /api/v1/portal-sessions` answers it. */
export interface OpenedPortalSession {
  /** `ps_...`, shown only here. */
  token: string;
  user_id: number;
  scope: PortalScope;
  /** ISO 8601. */
  expires_at: string;
}

/**
 * Mints a link for one user (docs/design.md §11.6). Only the sha256 of its token is stored.
 *
 * @param appUrl - APP_URL, without a trailing slash
 * @throws PortalUserNotFoundError when the user does not exist (or is deleted meanwhile)
 */
export async function createPortalLink(sequelize: Sequelize, appUrl: string, request: PortalLinkRequest): Promise<MintedPortalLink> {
  const token = generatePortalLinkToken();
  try {
    // One statement: no row when the user does not exist; the foreign key covers a delete racing it.
    const [row] = await sequelize.query<{ id: number; expires_at: Date }>(
      `INSERT INTO portal_links (user_id, token_hash, scope, session_ttl_s, expires_at, created_by_key_id)
       SELECT user_id, $2, $3, $4, now() + $5::int * interval '1 second', $6 FROM users WHERE user_id = $1
       RETURNING id, expires_at`,
      {
        bind: [request.userId, hashApiToken(token), request.scope, request.sessionTtlS, request.ttlS, request.createdByKeyId],
        type: QueryTypes.SELECT,
      },
    );
    if (!row) throw new PortalUserNotFoundError(request.userId);
    return { id: row.id, url: `${appUrl}${PORTAL_PATH}#token=${token}`, expires_at: row.expires_at.toISOString() };
  } catch (error) {
    if (error instanceof ForeignKeyConstraintError) throw new PortalUserNotFoundError(request.userId, { cause: error });
    throw error;
  }
}

/**
 * Exchanges a link's token for a session (docs/design.md §11.6), in one statement: the link is marked
 * used only if it is unused, unrevoked and unexpired, so of any number of exchanges at once
 * exactly one gets a session. The token is looked up by its sha256 (a unique index), so the
 * time taken tells nothing about the token.
 *
 * @returns the session, or null for a token that is unknown, used, revoked or expired
 */
export async function openPortalLink(sequelize: Sequelize, token: string): Promise<OpenedPortalSession | null> {
  const sessionToken = generatePortalSessionToken();
  const [row] = await sequelize.query<{ user_id: number; scope: PortalScope; expires_at: Date }>(
    `WITH opened AS (
       UPDATE portal_links SET used_at = now()
        WHERE token_hash = $1 AND used_at IS NULL AND revoked_at IS NULL AND expires_at > now()
       RETURNING id, user_id, scope, session_ttl_s
     )
     INSERT INTO portal_sessions (link_id, user_id, token_hash, scope, expires_at)
     SELECT id, user_id, $2, scope, now() + session_ttl_s * interval '1 second' FROM opened
     RETURNING user_id, scope, expires_at`,
    { bind: [hashApiToken(token), hashApiToken(sessionToken)], type: QueryTypes.SELECT },
  );
  return row ? { token: sessionToken, user_id: row.user_id, scope: row.scope, expires_at: row.expires_at.toISOString() } : null;
}

/**
 * Revokes a link (docs/design.md §11.6): it can no longer be opened and the session it opened ends.
 * A second revoke keeps the first time. Tell the api processes afterwards
 * (`{kind: 'portal_link', id}` on the credential-changes channel), so none keeps a cached session.
 *
 * @returns whether the link exists
 */
export async function revokePortalLink(sequelize: Sequelize, id: number): Promise<boolean> {
  const rows = await sequelize.query<{ id: number }>('UPDATE portal_links SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1 RETURNING id', {
    bind: [id],
    type: QueryTypes.SELECT,
  });
  return rows.length > 0;
}

interface LinkRow {
  id: number;
  user_id: number;
  scope: PortalScope;
  session_ttl_s: number;
  expires_at: Date;
  used_at: Date | null;
  revoked_at: Date | null;
  created_at: Date;
  created_at_micros: string;
}

/**
 * One user's links, newest first, cursor-paginated as every list of docs/design.md §11.1.
 *
 * @throws InvalidCursorError for a cursor this list did not hand out
 */
export async function listPortalLinks(sequelize: Sequelize, userId: number, page: { limit: number; cursor?: string }): Promise<Page<PortalLinkView>> {
  const bind: unknown[] = [userId];
  let after = '';
  if (page.cursor !== undefined) {
    const keyset = decodeCursor(page.cursor);
    if (!/^\d{1,10}$/.test(keyset.id)) throw new InvalidCursorError();
    after = `AND (created_at, id) < ('epoch'::timestamptz + $${bind.push(keyset.createdAtMicros)}::bigint * interval '1 microsecond', $${bind.push(Number(keyset.id))}::int)`;
  }
  const rows = await sequelize.query<LinkRow>(
    `SELECT id, user_id, scope, session_ttl_s, expires_at, used_at, revoked_at, created_at,
            (extract(epoch FROM created_at) * 1000000)::bigint::text AS created_at_micros
       FROM portal_links WHERE user_id = $1 ${after}
      ORDER BY created_at DESC, id DESC LIMIT $${bind.push(page.limit + 1)}`,
    { bind, type: QueryTypes.SELECT },
  );
  return toPage(rows, page.limit, (row) => String(row.id), presentLink);
}

function presentLink(row: LinkRow): PortalLinkView {
  return {
    id: row.id,
    user_id: row.user_id,
    scope: row.scope,
    session_ttl_s: row.session_ttl_s,
    expires_at: row.expires_at.toISOString(),
    used_at: row.used_at?.toISOString() ?? null,
    revoked_at: row.revoked_at?.toISOString() ?? null,
    created_at: row.created_at.toISOString(),
  };
}
