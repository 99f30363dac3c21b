'use strict';

/**
 * The operations API of docs/design.md §11.1:
 * - webhook_event_types: event types operators add to the catalog beside the built-in ones
 *   (which live in code with their JSON Schemas); names are lowercase and dotted.
 * - webhook_endpoints.deleted_at: a deleted endpoint is gone from the API and receives
 *   nothing, but its row stays so its deliveries keep their endpoint_id and, for an endpoint
 *   delivery, never fall back to another secret on a redelivery.
 * - The delivery list is read newest first by (created_at, id), the keyset of its cursor.
 */
module.exports = {
  async up(queryInterface) {
    await queryInterface.sequelize.query(`
      CREATE TABLE webhook_event_types (
        name        TEXT PRIMARY KEY CHECK (name ~ '^[a-z0-9_-]+(\\.[a-z0-9_-]+)+$' AND length(name) <= 100),
        description TEXT,
        schema      JSONB,
        created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
        updated_at  TIMESTAMPTZ NOT NULL DEFAULT now()
      );
      ALTER TABLE webhook_endpoints ADD COLUMN deleted_at TIMESTAMPTZ;
      CREATE INDEX webhook_deliveries_created_idx ON webhook_deliveries (created_at DESC, id DESC);
    `);
  },

  async down(queryInterface) {
    await queryInterface.sequelize.query(`
      DROP INDEX IF EXISTS webhook_deliveries_created_idx;
      ALTER TABLE webhook_endpoints DROP COLUMN IF EXISTS deleted_at;
      DROP TABLE IF EXISTS webhook_event_types;
    `);
  },
};
