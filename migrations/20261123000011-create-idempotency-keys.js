'use strict';

/**
 * idempotency_keys (docs/design.md §12.1): the first answer to a create sent with an
 * `Idempotency-Key`, per principal (`user:<id>` or `key:<id>`), kept 24 h. A row with no
 * response_status is a request still running: a concurrent duplicate waits for it, never runs
 * beside it. In PostgreSQL, not Redis, because the answer must outlive a Redis restart just as
 * the post it describes does.
 */
module.exports = {
  async up(queryInterface) {
    await queryInterface.sequelize.query(`
      CREATE TABLE idempotency_keys (
        principal             TEXT NOT NULL,
        idempotency_key       VARCHAR(255) NOT NULL,
        fingerprint           CHAR(64) NOT NULL,
        response_status       INTEGER,
        response_body         TEXT,
        response_content_type TEXT,
        created_at            TIMESTAMPTZ NOT NULL DEFAULT now(),
        expires_at            TIMESTAMPTZ NOT NULL,
        PRIMARY KEY (principal, idempotency_key)
      );
      CREATE INDEX idempotency_keys_expires_idx ON idempotency_keys (expires_at);
    `);
  },

  async down(queryInterface) {
    await queryInterface.sequelize.query('DROP TABLE IF EXISTS idempotency_keys');
  },
};
