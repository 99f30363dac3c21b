'use strict';

/**
 * webhook_inbox.body_sha256 (docs/design.md §8): the sha256 hex of every accepted body,
 * whichever signature scheme verified it. With RECEIVER_ACCEPT_X_SIGNATURE_ONLY=true the
 * receiver refuses to process a body seen before, so a captured delivery replayed with its
 * `webhook-*` headers stripped (X-Signature only, no timestamp) is not applied twice. It is
 * recorded in strict mode too, so turning that setting on later also covers earlier bodies.
 * Not unique: in strict mode two deliveries with distinct webhook-ids may carry equal bodies.
 */
module.exports = {
  async up(queryInterface) {
    await queryInterface.sequelize.query(`
      ALTER TABLE webhook_inbox ADD COLUMN body_sha256 TEXT;
      CREATE INDEX webhook_inbox_body_sha256_idx ON webhook_inbox (body_sha256) WHERE body_sha256 IS NOT NULL;
    `);
  },

  async down(queryInterface) {
    await queryInterface.sequelize.query('ALTER TABLE webhook_inbox DROP COLUMN IF EXISTS body_sha256');
  },
};
