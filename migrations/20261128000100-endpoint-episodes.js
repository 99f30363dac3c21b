'use strict';

/**
 * Failure episodes of endpoints (docs/design.md §6.6): an episode opens at a
 * failed attempt when none is open and closes at a success or a re-enable. Its state lives
 * in the endpoint's row, changed by conditional UPDATEs only, so several workers, or a Redis
 * that lost the circuits, never emit one of its events twice.
 * - `episode_id`: the open episode's id (`epi_` + a UUIDv7 as webhook_new_id draws), NULL
 *   while healthy; open exactly when `failing_since` (the episode's start) is set, as the
 *   CHECK says;
 * - `consecutive_failures`: failed attempts in the open episode (0 while healthy);
 * - `last_failure_status_code`, `last_failure_error`: the endpoint's last failed attempt;
 * - `episode_events`: the operational events emitted in the open episode
 *   (`endpoint.failing`, `endpoint.disabled`), which decide whether `endpoint.recovered` follows.
 * An endpoint failing before this migration gets an episode of its own, one failure counted,
 * nothing emitted. Down drops the columns; `failing_since` stays, as before.
 */
module.exports = {
  async up(queryInterface) {
    await queryInterface.sequelize.query(`
      ALTER TABLE webhook_endpoints
        ADD COLUMN episode_id TEXT,
        ADD COLUMN consecutive_failures INTEGER NOT NULL DEFAULT 0,
        ADD COLUMN last_failure_status_code INTEGER,
        ADD COLUMN last_failure_error TEXT,
        ADD COLUMN episode_events TEXT[] NOT NULL DEFAULT '{}';
      UPDATE webhook_endpoints SET episode_id = webhook_new_id('epi_'), consecutive_failures = 1 WHERE failing_since IS NOT NULL;
      ALTER TABLE webhook_endpoints
        ADD CONSTRAINT webhook_endpoints_episode_check CHECK ((episode_id IS NULL) = (failing_since IS NULL));
    `);
  },

  async down(queryInterface) {
    await queryInterface.sequelize.query(`
      ALTER TABLE webhook_endpoints
        DROP CONSTRAINT IF EXISTS webhook_endpoints_episode_check,
        DROP COLUMN IF EXISTS episode_events,
        DROP COLUMN IF EXISTS last_failure_error,
        DROP COLUMN IF EXISTS last_failure_status_code,
        DROP COLUMN IF EXISTS consecutive_failures,
        DROP COLUMN IF EXISTS episode_id;
    `);
  },
};
