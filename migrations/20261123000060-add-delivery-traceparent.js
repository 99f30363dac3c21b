'use strict';

/**
 * Tracing (docs/design.md §12.2): the W3C Trace Context (`traceparent`) of the api request
 * that wrote a delivery, so the worker's attempt spans join that trace, also after Redis
 * lost the job and the outbox relay queued it again. NULL when tracing is off.
 */
module.exports = {
  async up(queryInterface) {
    await queryInterface.sequelize.query('ALTER TABLE webhook_deliveries ADD COLUMN traceparent TEXT');
  },

  async down(queryInterface) {
    await queryInterface.sequelize.query('ALTER TABLE webhook_deliveries DROP COLUMN IF EXISTS traceparent');
  },
};
