'use strict';

const devDefaults = require('../shared/config/dev-defaults.json');

/**
 * One endpoint subscribed to every post event, pointing at the receiver's sink
 * (docs/design.md §6.1), so a fresh system shows a signed post event arriving end to end.
 *
 * RECEIVER_SECRET may list several secrets, newest first, while the receiver accepts both a
 * new and an old one; the endpoint is seeded with the first, since the old one is on its way
 * out. An endpoint that already exists is left alone: rotate it with `npm run endpoints --
 * rotate`. `whpk_` public keys in the list are skipped: the sender signs with the private key,
 * which only an ed25519 endpoint made over the API holds, so a list of them alone seeds nothing.
 */
module.exports = {
  async up(queryInterface) {
    const url = process.env.SEED_ENDPOINT_URL || 'http://localhost:3002/webhooks/posts';
    const listed = (process.env.RECEIVER_SECRET || '').trim().split(/\s+/).filter((one) => one !== '');
    const secret = listed.length === 0 ? devDefaults.receiverSecret : listed.find((one) => !one.startsWith('whpk_'));
    if (!secret) return;
    await queryInterface.sequelize.query(
      `INSERT INTO webhook_endpoints (url, secret, events, description)
       SELECT :url, :secret, ARRAY['post.created', 'post.updated', 'post.deleted'], 'receiver sink (seeded)'
       WHERE NOT EXISTS (SELECT 1 FROM webhook_endpoints WHERE url = :url)`,
      { replacements: { url, secret } },
    );
  },

  async down(queryInterface) {
    await queryInterface.sequelize.query(`DELETE FROM webhook_endpoints WHERE description = 'receiver sink (seeded)'`);
  },
};
