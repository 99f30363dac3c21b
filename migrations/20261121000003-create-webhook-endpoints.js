'use strict';

/** webhook_endpoints: docs/design.md §3. An empty events array subscribes to every event. */
module.exports = {
  async up(queryInterface) {
    await queryInterface.sequelize.query(`
      CREATE TABLE webhook_endpoints (
        id              SERIAL PRIMARY KEY,
        url             TEXT NOT NULL,
        secret          TEXT NOT NULL,
        events          TEXT[] NOT NULL DEFAULT '{}',
        active          BOOLEAN NOT NULL DEFAULT true,
        description     TEXT,
        disabled_reason TEXT,
        created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
        updated_at      TIMESTAMPTZ NOT NULL DEFAULT now()
      );
      CREATE INDEX webhook_endpoints_active_idx ON webhook_endpoints (id) WHERE active;
    `);
  },

  async down(queryInterface) {
    await queryInterface.sequelize.query('DROP TABLE IF EXISTS webhook_endpoints');
  },
};
