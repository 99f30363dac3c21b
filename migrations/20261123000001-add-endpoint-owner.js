'use strict';

/**
 * Endpoint ownership (docs/design.md §6.2): an endpoint a user registers with their own
 * token belongs to them (`user_id`) and receives only events of their own posts; an endpoint
 * created with a service key, the CLI or the seeders is an operator endpoint (`user_id` NULL)
 * and receives every subscribed event. A deleted user's endpoints go with them.
 */
module.exports = {
  async up(queryInterface) {
    await queryInterface.sequelize.query(`
      ALTER TABLE webhook_endpoints
        ADD COLUMN user_id INTEGER REFERENCES users (user_id) ON DELETE CASCADE;
      CREATE INDEX webhook_endpoints_user_idx ON webhook_endpoints (user_id) WHERE user_id IS NOT NULL;
    `);
  },

  async down(queryInterface) {
    await queryInterface.sequelize.query('ALTER TABLE webhook_endpoints DROP COLUMN IF EXISTS user_id');
  },
};
