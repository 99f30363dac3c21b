'use strict';

/**
 * Secret rotation of webhook_endpoints (docs/design.md §7): after a rotation the worker signs with
 * `secret` and, until `previous_secret_expires_at`, also with `previous_secret`, so receivers
 * can switch to the new secret at their own pace. The two columns are set and cleared together.
 */
module.exports = {
  async up(queryInterface) {
    await queryInterface.sequelize.query(`
      ALTER TABLE webhook_endpoints
        ADD COLUMN previous_secret            TEXT,
        ADD COLUMN previous_secret_expires_at TIMESTAMPTZ,
        ADD CONSTRAINT webhook_endpoints_previous_secret_pair
          CHECK ((previous_secret IS NULL) = (previous_secret_expires_at IS NULL));
    `);
  },

  async down(queryInterface) {
    // Dropping the columns drops the CHECK that refers to them.
    await queryInterface.sequelize.query(`
      ALTER TABLE webhook_endpoints
        DROP COLUMN IF EXISTS previous_secret_expires_at,
        DROP COLUMN IF EXISTS previous_secret;
    `);
  },
};
