'use strict';

/**
 * Endpoint controls (docs/design.md §14.1): columns only; the api validates the values.
 * - headers: static headers sent with every delivery, names lowercase.
 * - rate_limit_per_s: attempts started per second across all workers, null for none.
 * - filter: a JSON object matched against the event's data before a delivery is made.
 * - ordering: unordered, or fifo (docs/design.md §6.5).
 * - signature_scheme: hmac-sha256 (secret is whsec_...) or ed25519 (secret is the private
 *   key, whsk_...; previous_secret likewise while a rotation overlaps).
 */
module.exports = {
  async up(queryInterface) {
    await queryInterface.sequelize.query(`
      ALTER TABLE webhook_endpoints
        ADD COLUMN headers JSONB NOT NULL DEFAULT '{}'::jsonb,
        ADD COLUMN rate_limit_per_s INTEGER
          CONSTRAINT webhook_endpoints_rate_limit_range CHECK (rate_limit_per_s BETWEEN 1 AND 10000),
        ADD COLUMN filter JSONB,
        ADD COLUMN ordering TEXT NOT NULL DEFAULT 'unordered'
          CONSTRAINT webhook_endpoints_ordering_values CHECK (ordering IN ('unordered', 'fifo')),
        ADD COLUMN signature_scheme TEXT NOT NULL DEFAULT 'hmac-sha256'
          CONSTRAINT webhook_endpoints_signature_scheme_values CHECK (signature_scheme IN ('hmac-sha256', 'ed25519'));
    `);
  },

  async down(queryInterface) {
    await queryInterface.sequelize.query(`
      ALTER TABLE webhook_endpoints
        DROP COLUMN IF EXISTS signature_scheme,
        DROP COLUMN IF EXISTS ordering,
        DROP COLUMN IF EXISTS filter,
        DROP COLUMN IF EXISTS rate_limit_per_s,
        DROP COLUMN IF EXISTS headers;
    `);
  },
};
