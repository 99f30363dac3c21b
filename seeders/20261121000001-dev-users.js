'use strict';

const { createHash } = require('node:crypto');

/**
 * Two users for local use only (docs/design.md §4): user 1 with token dev-token-user-1 and no
 * quota, user 2 with token dev-token-user-2 and a quota of 1000. Only token hashes are stored.
 * Seeded only outside production (NODE_ENV not `production`) or with SEED_DEMO=true: a
 * production database gets generated credentials instead (see the credentials seeder).
 */
const sha256 = (value) => createHash('sha256').update(value, 'utf8').digest('hex');
const demoCredentials = () => process.env.NODE_ENV !== 'production' || /^\s*true\s*$/i.test(process.env.SEED_DEMO || '');

module.exports = {
  async up(queryInterface) {
    if (!demoCredentials()) return;
    await queryInterface.sequelize.query(
      `INSERT INTO users (user_id, user_name, user_email, api_token_hash, quota_limit)
       VALUES (1, 'Dev User One', 'user1@example.com', :token1, 0),
              (2, 'Dev User Two', 'user2@example.com', :token2, 1000)
       ON CONFLICT (user_id) DO NOTHING;
       SELECT setval('users_user_id_seq', GREATEST((SELECT max(user_id) FROM users), 1));`,
      { replacements: { token1: sha256('dev-token-user-1'), token2: sha256('dev-token-user-2') } },
    );
  },

  async down(queryInterface) {
    await queryInterface.sequelize.query('DELETE FROM users WHERE user_id IN (1, 2) AND api_token_hash IN (:hashes)', {
      replacements: { hashes: [sha256('dev-token-user-1'), sha256('dev-token-user-2')] },
    });
  },
};
