'use strict';

/**
 * Events stored once (docs/design.md §3.2). `webhook_events` holds one row per event made:
 * a post change, a fan-out of POST /api/v1/events, an ad-hoc send, a test, an operator
 * notice; its `body` is the exact bytes every delivery of the event sends. A delivery
 * references its event (`event_id`) and no longer holds a copy of the body, so an event fanned
 * out to 100 endpoints stores its body once. Rows written before this migration keep their own
 * `body` (now nullable), which the worker reads first.
 *
 * `webhook_new_id(prefix)` draws the time-ordered ids of §3.3 inside PostgreSQL (15 has no
 * UUIDv7): the prefix and the base64url of a UUIDv7's 16 bytes, 48-bit unix milliseconds first
 * (RFC 9562 §5.7), so the wire format of ids is unchanged.
 *
 * The reference is not a foreign key: the day partitions of §3.4 cannot carry one, and the code
 * keeps it whole. Down copies each event's body back into its deliveries first, so no row
 * loses its bytes.
 */
module.exports = {
  async up(queryInterface) {
    await queryInterface.sequelize.query(`
      CREATE FUNCTION webhook_new_id(prefix text) RETURNS text LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
        SELECT prefix || rtrim(translate(encode(set_byte(b, 6, (get_byte(b, 6) & 15) | 112), 'base64'), '+/', '-_'), '=')
          FROM (SELECT overlay(uuid_send(gen_random_uuid())
                               PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
                               FROM 1 FOR 6) AS b) AS fresh
      $$;

      CREATE TABLE webhook_events (
        id         TEXT PRIMARY KEY,
        kind       VARCHAR(16) NOT NULL CHECK (kind IN ('post', 'fan-out', 'send', 'test', 'notice')),
        event      TEXT,
        body       TEXT NOT NULL,
        user_id    INTEGER,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now()
      );
      CREATE INDEX webhook_events_created_idx ON webhook_events (created_at);

      ALTER TABLE webhook_deliveries ADD COLUMN event_id TEXT, ALTER COLUMN body DROP NOT NULL;
      CREATE INDEX webhook_deliveries_event_idx ON webhook_deliveries (event_id, endpoint_id) WHERE event_id IS NOT NULL;
    `);
  },

  async down(queryInterface) {
    await queryInterface.sequelize.query(`
      UPDATE webhook_deliveries d SET body = e.body FROM webhook_events e WHERE d.event_id = e.id AND d.body IS NULL;
      DROP INDEX IF EXISTS webhook_deliveries_event_idx;
      ALTER TABLE webhook_deliveries DROP COLUMN IF EXISTS event_id, ALTER COLUMN body SET NOT NULL;
      DROP TABLE IF EXISTS webhook_events;
      DROP FUNCTION IF EXISTS webhook_new_id(text);
    `);
  },
};
