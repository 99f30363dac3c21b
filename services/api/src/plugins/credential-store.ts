import type { FastifyBaseLogger } from 'fastify';
import { QueryTypes, Sequelize } from 'sequelize';

/** What authenticating a user needs from `users`. */
export interface UserCredential {
  /** sha256 hex of the current bearer token; null once revoked. */
  tokenHash: string | null;
  /** 0 = unlimited. */
  quotaLimit: number;
}

/** What authenticating a service key needs from `service_keys`. */
export interface ServiceKeyCredential {
  id: number;
  name: string;
  keyHash: string;
  scopes: string[];
  revoked: boolean;
}

/** What authenticating a portal session needs from `portal_sessions` and its link (docs/design.md §11.6). */
export interface PortalSessionCredential {
  linkId: number;
  userId: number;
  tokenHash: string;
  scope: 'read' | 'manage';
  /** Epoch ms; the session is refused from then on. */
  expiresAt: number;
  /** Its link was revoked. */
  revoked: boolean;
}

/** Reads stored credentials; every method resolves null for an unknown user, key or session. */
export interface CredentialStore {
  findUser(userId: number): Promise<UserCredential | null>;
  findServiceKey(keyHash: string): Promise<ServiceKeyCredential | null>;
  /** A portal session by the sha256 of its `ps_` token; gone with its user. */
  findPortalSession(tokenHash: string): Promise<PortalSessionCredential | null>;
  /** The user whose current token has this hash, to tell `user_mismatch` from `unknown_token` in the log. */
  findTokenOwner(tokenHash: string): Promise<number | null>;
  /** Records that a key was used; writes `last_used_at` at most once per `touchIntervalMs` per key. */
  touchServiceKey(id: number): void;
}

export interface CredentialStoreOptions {
  log: FastifyBaseLogger;
  /** Least time between two `last_used_at` writes for one key in this process, ms. Default 60 000. */
  touchIntervalMs?: number;
}

/**
 * The credential store over PostgreSQL: one primary-key or unique-index lookup per call
 * (a portal session joins its link by primary key).
 * `last_used_at` is throttled so that a busy key costs one write a minute, not one per request.
 */
export function createCredentialStore(sequelize: Sequelize, { log, touchIntervalMs = 60_000 }: CredentialStoreOptions): CredentialStore {
  const lastTouched = new Map<number, number>();
  const select = <T extends object>(sql: string, bind: unknown[]) => sequelize.query<T>(sql, { bind, type: QueryTypes.SELECT, raw: true });
  return {
    async findUser(userId) {
      const [row] = await select<{ api_token_hash: string | null; quota_limit: number }>(
        'SELECT api_token_hash, quota_limit FROM users WHERE user_id = $1',
        [userId],
      );
      return row ? { tokenHash: row.api_token_hash, quotaLimit: row.quota_limit } : null;
    },
    async findServiceKey(keyHash) {
      const [row] = await select<{ id: number; name: string; key_hash: string; scopes: string[]; revoked: boolean }>(
        'SELECT id, name, key_hash, scopes, revoked_at IS NOT NULL AS revoked FROM service_keys WHERE key_hash = $1',
        [keyHash],
      );
      return row ? { id: row.id, name: row.name, keyHash: row.key_hash, scopes: row.scopes, revoked: row.revoked } : null;
    },
    async findPortalSession(tokenHash) {
      const [row] = await select<{ link_id: number; user_id: number; token_hash: string; scope: 'read' | 'manage'; expires_at: Date; revoked: boolean }>(
        `SELECT s.link_id, s.user_id, s.token_hash, s.scope, s.expires_at, l.revoked_at IS NOT NULL AS revoked
           FROM portal_sessions s JOIN portal_links l ON l.id = s.link_id WHERE s.token_hash = $1`,
        [tokenHash],
      );
      if (!row) return null;
      return { linkId: row.link_id, userId: row.user_id, tokenHash: row.token_hash, scope: row.scope, expiresAt: row.expires_at.getTime(), revoked: row.revoked };
    },
    async findTokenOwner(tokenHash) {
      const [row] = await select<{ user_id: number }>('SELECT user_id FROM users WHERE api_token_hash = $1', [tokenHash]);
      return row?.user_id ?? null;
    },
    touchServiceKey(id) {
      const now = Date.now();
      if (now - (lastTouched.get(id) ?? -Infinity) < touchIntervalMs) return;
      lastTouched.set(id, now);
      sequelize
        .query('UPDATE service_keys SET last_used_at = now() WHERE id = $1', { bind: [id] })
        .catch((err: Error) => log.warn({ err, serviceKeyId: id }, 'could not record the service key as used'));
    },
  };
}
