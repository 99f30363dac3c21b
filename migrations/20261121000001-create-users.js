'use strict';

/** users: docs/design.md §3. user_id is the spec's "integer, length 5", enforced by a CHECK. */
module.exports = {
  async up(queryInterface) {
    await queryInterface.sequelize.query(`
      CREATE SEQUENCE users_user_id_seq MINVALUE 1 MAXVALUE 99999;
      CREATE TABLE users (
        user_id            INTEGER PRIMARY KEY DEFAULT nextval('users_user_id_seq')
                           CONSTRAINT users_user_id_range CHECK (user_id BETWEEN 1 AND 99999),
        user_name          VARCHAR(255) NOT NULL,
        user_email         VARCHAR(320) NOT NULL CONSTRAINT users_user_email_key UNIQUE,
        api_token_hash     CHAR(64) CONSTRAINT users_api_token_hash_key UNIQUE,
        quota_limit        INTEGER NOT NULL DEFAULT 0 CHECK (quota_limit >= 0),
        quota_used         INTEGER NOT NULL DEFAULT 0 CHECK (quota_used >= 0),
        quota_period_start TIMESTAMPTZ NOT NULL DEFAULT now(),
        created_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
        updated_at         TIMESTAMPTZ NOT NULL DEFAULT now()
      );
      ALTER SEQUENCE users_user_id_seq OWNED BY users.user_id;
    `);
  },

  async down(queryInterface) {
    await queryInterface.sequelize.query('DROP TABLE IF EXISTS users');
  },
};
