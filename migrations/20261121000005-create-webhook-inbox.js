'use strict';

/**
 * webhook_inbox: the receiver's dedupe table (docs/design.md §3). webhook_id is the sender's
 * webhook-id, or the sha256 of the body when the sender gives none.
 */
module.exports = {
  async up(queryInterface) {
    await queryInterface.sequelize.query(`
      CREATE TABLE webhook_inbox (
        webhook_id   TEXT PRIMARY KEY,
        topic        TEXT NOT NULL,
        event        TEXT,
        received_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
        processed_at TIMESTAMPTZ
      );
    `);
  },

  async down(queryInterface) {
    await queryInterface.sequelize.query('DROP TABLE IF EXISTS webhook_inbox');
  },
};
