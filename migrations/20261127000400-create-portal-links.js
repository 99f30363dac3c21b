'use strict';

/**
 * Portal links (docs/design.md §11.6): an operator's one-time link into the dashboard for
 * one user, and the sessions those links open.
 *
 * portal_links: only the sha256 (lowercase hex) of the link's token is stored; `used_at` is
 * set by the one exchange that opens it, `revoked_at` by `DELETE /api/v1/portal-links/{id}`
 * (the row stays, so the operator can see what was handed out). `expires_at` bounds the time
 * to open the link; `session_ttl_s` is the life of the session it opens.
 *
 * portal_sessions: the `ps_` session a link was exchanged for (at most one per link), again
 * only as its sha256. A revoked link ends its session; a deleted user takes both with them.
 */
module.exports = {
  async up(queryInterface) {
    await queryInterface.sequelize.query(`
      CREATE TABLE portal_links (
        id                SERIAL PRIMARY KEY,
        user_id           INTEGER NOT NULL REFERENCES users (user_id) ON DELETE CASCADE,
        token_hash        CHAR(64) NOT NULL CONSTRAINT portal_links_token_hash_key UNIQUE,
        scope             TEXT NOT NULL CONSTRAINT portal_links_scope_check CHECK (scope IN ('read', 'manage')),
        session_ttl_s     INTEGER NOT NULL CONSTRAINT portal_links_session_ttl_check CHECK (session_ttl_s BETWEEN 60 AND 86400),
        expires_at        TIMESTAMPTZ NOT NULL,
        used_at           TIMESTAMPTZ,
        revoked_at        TIMESTAMPTZ,
        created_by_key_id INTEGER REFERENCES service_keys (id) ON DELETE SET NULL,
        created_at        TIMESTAMPTZ NOT NULL DEFAULT now()
      );
      CREATE INDEX portal_links_user_idx ON portal_links (user_id, created_at DESC, id DESC);

      CREATE TABLE portal_sessions (
        id         SERIAL PRIMARY KEY,
        link_id    INTEGER NOT NULL CONSTRAINT portal_sessions_link_id_key UNIQUE REFERENCES portal_links (id) ON DELETE CASCADE,
        user_id    INTEGER NOT NULL REFERENCES users (user_id) ON DELETE CASCADE,
        token_hash CHAR(64) NOT NULL CONSTRAINT portal_sessions_token_hash_key UNIQUE,
        scope      TEXT NOT NULL CONSTRAINT portal_sessions_scope_check CHECK (scope IN ('read', 'manage')),
        expires_at TIMESTAMPTZ NOT NULL,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now()
      );
      CREATE INDEX portal_sessions_user_idx ON portal_sessions (user_id);
    `);
  },

  async down(queryInterface) {
    await queryInterface.sequelize.query('DROP TABLE IF EXISTS portal_sessions; DROP TABLE IF EXISTS portal_links');
  },
};
