'use strict';

const KINDS = ['post', 'fan-out', 'send', 'test', 'notice'];

/** The CHECK of `webhook_events.kind` over `kinds`, added NOT VALID and then validated. */
async function checkKinds(queryInterface, kinds) {
  const list = kinds.map((kind) => `'${kind}'`).join(', ');
  // Two statements: the ADD holds its ACCESS EXCLUSIVE lock only briefly; the scan of every
  // partition runs under VALIDATE's lighter lock, which lets writes go on.
  await queryInterface.sequelize.query(`
    ALTER TABLE webhook_events DROP CONSTRAINT webhook_events_kind_check,
      ADD CONSTRAINT webhook_events_kind_check CHECK (kind IN (${list})) NOT VALID`);
  await queryInterface.sequelize.query('ALTER TABLE webhook_events VALIDATE CONSTRAINT webhook_events_kind_check');
}

/**
 * Operational events (docs/design.md §6.6): `webhook_events.kind` gains `operational`, the kind of
 * the events the system emits about endpoints (`endpoint.disabled`), which go out through the
 * ordinary fan-out. `notice`, the kind the worker wrote for `endpoint.disabled` before, stays
 * allowed for the rows it made. Down turns `operational` rows back into `notice` ones.
 */
module.exports = {
  async up(queryInterface) {
    await checkKinds(queryInterface, [...KINDS, 'operational']);
  },

  async down(queryInterface) {
    await queryInterface.sequelize.query(`UPDATE webhook_events SET kind = 'notice' WHERE kind = 'operational'`);
    await checkKinds(queryInterface, KINDS);
  },
};
