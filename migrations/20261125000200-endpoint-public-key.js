'use strict';

/**
 * docs/design.md §14.1 `signature_scheme: "ed25519"`: such an endpoint keeps its `whsk_` private key in
 * `secret` (and the one it rotated from in `previous_secret`, as HMAC secrets are kept) and
 * its `whpk_` public key here, which the API shows (the private key never leaves the server).
 */
module.exports = {
  async up(queryInterface) {
    await queryInterface.sequelize.query('ALTER TABLE webhook_endpoints ADD COLUMN public_key TEXT');
  },

  async down(queryInterface) {
    await queryInterface.sequelize.query('ALTER TABLE webhook_endpoints DROP COLUMN IF EXISTS public_key');
  },
};
