'use strict';

/**
 * Isolation and recovery (docs/design.md §6.4, §6.7).
 * - webhook_endpoints.failing_since: the first failed attempt after the last success; the
 *   worker disables an endpoint once it is older than WEBHOOK_DISABLE_AFTER_S. NULL while healthy.
 * - webhook_deliveries.endpoint_deleted: the delivery's endpoint was deleted (its endpoint_id
 *   is then NULL, like an ad-hoc send's), so the worker never falls back to the derived
 *   APP_KEY secret for it. A trigger sets it, whoever deletes the endpoint.
 * - webhook_deliveries.one_shot: a redelivery (exactly one new attempt); kept in the row so a
 *   redelivery whose job Redis lost is revived as one attempt, not a whole retry schedule.
 * - Indexes for the relay's revival sweep and the retention prune.
 */
module.exports = {
  async up(queryInterface) {
    await queryInterface.sequelize.query(`
      ALTER TABLE webhook_endpoints ADD COLUMN failing_since TIMESTAMPTZ;
      ALTER TABLE webhook_deliveries
        ADD COLUMN endpoint_deleted BOOLEAN NOT NULL DEFAULT false,
        ADD COLUMN one_shot BOOLEAN NOT NULL DEFAULT false;

      CREATE FUNCTION webhook_endpoint_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        UPDATE webhook_deliveries SET endpoint_deleted = true WHERE endpoint_id = OLD.id;
        RETURN OLD;
      END $$;
      CREATE TRIGGER webhook_endpoints_mark_deliveries BEFORE DELETE ON webhook_endpoints
        FOR EACH ROW EXECUTE FUNCTION webhook_endpoint_deleted();

      CREATE INDEX webhook_deliveries_queued_idx ON webhook_deliveries (id)
        WHERE status IN ('pending', 'delivering') AND enqueued_at IS NOT NULL;
      CREATE INDEX webhook_deliveries_queued_touched_idx ON webhook_deliveries (updated_at)
        WHERE status IN ('pending', 'delivering') AND enqueued_at IS NOT NULL;
      CREATE INDEX webhook_deliveries_succeeded_idx ON webhook_deliveries (created_at)
        WHERE status = 'succeeded';
      CREATE INDEX webhook_inbox_received_idx ON webhook_inbox (received_at);
    `);
  },

  async down(queryInterface) {
    await queryInterface.sequelize.query(`
      DROP INDEX IF EXISTS webhook_inbox_received_idx;
      DROP INDEX IF EXISTS webhook_deliveries_succeeded_idx;
      DROP INDEX IF EXISTS webhook_deliveries_queued_touched_idx;
      DROP INDEX IF EXISTS webhook_deliveries_queued_idx;
      DROP TRIGGER IF EXISTS webhook_endpoints_mark_deliveries ON webhook_endpoints;
      DROP FUNCTION IF EXISTS webhook_endpoint_deleted();
      ALTER TABLE webhook_deliveries DROP COLUMN IF EXISTS one_shot, DROP COLUMN IF EXISTS endpoint_deleted;
      ALTER TABLE webhook_endpoints DROP COLUMN IF EXISTS failing_since;
    `);
  },
};
