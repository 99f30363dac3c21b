'use strict';

/**
 * FIFO endpoints (docs/design.md §6.5). A delivery to an endpoint whose `ordering` is
 * `fifo` takes the next number of the endpoint's sequence in the transaction that writes it:
 * the trigger's UPDATE holds the endpoint row until that transaction ends, so numbers follow
 * commit order across api processes, whichever code path writes the delivery. Deliveries to
 * other endpoints pass the trigger with one primary-key probe and no lock.
 * The partial index serves the worker's "is anything ahead of this one" probe and its search
 * for the next in line.
 */
module.exports = {
  async up(queryInterface) {
    await queryInterface.sequelize.query(`
      ALTER TABLE webhook_endpoints ADD COLUMN fifo_sequence BIGINT NOT NULL DEFAULT 0;
      ALTER TABLE webhook_deliveries ADD COLUMN sequence BIGINT;

      CREATE FUNCTION webhook_delivery_sequence() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        UPDATE webhook_endpoints SET fifo_sequence = fifo_sequence + 1
         WHERE id = NEW.endpoint_id AND ordering = 'fifo'
        RETURNING fifo_sequence INTO NEW.sequence;
        RETURN NEW;
      END $$;
      CREATE TRIGGER webhook_deliveries_sequence BEFORE INSERT ON webhook_deliveries
        FOR EACH ROW WHEN (NEW.endpoint_id IS NOT NULL AND NEW.sequence IS NULL)
        EXECUTE FUNCTION webhook_delivery_sequence();

      CREATE INDEX webhook_deliveries_fifo_idx ON webhook_deliveries (endpoint_id, sequence)
        WHERE sequence IS NOT NULL AND status IN ('pending', 'delivering');
    `);
  },

  async down(queryInterface) {
    await queryInterface.sequelize.query(`
      DROP INDEX IF EXISTS webhook_deliveries_fifo_idx;
      DROP TRIGGER IF EXISTS webhook_deliveries_sequence ON webhook_deliveries;
      DROP FUNCTION IF EXISTS webhook_delivery_sequence();
      ALTER TABLE webhook_deliveries DROP COLUMN IF EXISTS sequence;
      ALTER TABLE webhook_endpoints DROP COLUMN IF EXISTS fifo_sequence;
    `);
  },
};
