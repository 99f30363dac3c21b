'use strict';

/**
 * service_keys (docs/design.md §4): credentials of other services and operators,
 * `Authorization: Bearer sk_...` without a user id. Only the sha256 (lowercase hex) of a key
 * is stored. `scopes` holds webhooks:send, webhooks:read, endpoints:read, endpoints:write or
 * `*`. A revoked key keeps its row (revoked_at set) so the operator can see what it was.
 */
module.exports = {
  async up(queryInterface) {
    await queryInterface.sequelize.query(`
      CREATE TABLE service_keys (
        id           SERIAL PRIMARY KEY,
        name         VARCHAR(255) NOT NULL,
        key_hash     CHAR(64) NOT NULL CONSTRAINT service_keys_key_hash_key UNIQUE,
        scopes       TEXT[] NOT NULL DEFAULT '{}',
        revoked_at   TIMESTAMPTZ,
        last_used_at TIMESTAMPTZ,
        created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
        updated_at   TIMESTAMPTZ NOT NULL DEFAULT now()
      );
    `);
  },

  async down(queryInterface) {
    await queryInterface.sequelize.query('DROP TABLE IF EXISTS service_keys');
  },
};
