'use strict';

/**
 * Attempts follow their endpoint (docs/design.md §6.3): each attempt
 * goes to its endpoint's URL as it is when the attempt starts, so
 * - `webhook_attempts.url`: the URL the attempt went to (NULL for attempts made before this
 *   migration, whose URL was their delivery's);
 * - `webhook_endpoints.origin_epoch`: counts the endpoint's moves to another origin; each
 *   attempt carries the epoch it started with, and what it says of the endpoint's health
 *   (failure episode, disabling, circuit) counts only while the epoch is still the same.
 * Adding a nullable column and one with a constant default rewrites no rows. Down drops both.
 */
module.exports = {
  async up(queryInterface) {
    await queryInterface.sequelize.query(`
      ALTER TABLE webhook_attempts ADD COLUMN url TEXT;
      ALTER TABLE webhook_endpoints ADD COLUMN origin_epoch INTEGER NOT NULL DEFAULT 0;
    `);
  },

  async down(queryInterface) {
    await queryInterface.sequelize.query(`
      ALTER TABLE webhook_endpoints DROP COLUMN IF EXISTS origin_epoch;
      ALTER TABLE webhook_attempts DROP COLUMN IF EXISTS url;
    `);
  },
};
