'use strict';

/**
 * docs/design.md §15: a request that died with its Idempotency-Key claimed must not block the key for
 * 24 h. `lease_expires_at` is how long the claim holds without news from the process that
 * runs it (renewed while it runs, at most 60 s ahead); once past, a retry takes the claim
 * over. `post_pid` is written in the same statement that creates the post, so the retry
 * knows whether the dead request committed: if it did, the retry answers with that post
 * instead of creating a second one.
 */
module.exports = {
  async up(queryInterface) {
    await queryInterface.sequelize.query(`
      ALTER TABLE idempotency_keys ADD COLUMN lease_expires_at TIMESTAMPTZ, ADD COLUMN post_pid INTEGER;
      UPDATE idempotency_keys SET lease_expires_at = created_at + interval '60 seconds' WHERE response_status IS NULL;
    `);
  },

  async down(queryInterface) {
    await queryInterface.sequelize.query('ALTER TABLE idempotency_keys DROP COLUMN lease_expires_at, DROP COLUMN post_pid');
  },
};
