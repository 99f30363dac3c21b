'use strict';

/**
 * webhook_deliveries is the outbox and the delivery log (docs/design.md §3, §6.1); id is the
 * webhook-id, stable across retries. webhook_attempts keeps one row per HTTP attempt.
 * Secrets of ad-hoc sends live here, never in Redis.
 */
module.exports = {
  async up(queryInterface) {
    await queryInterface.sequelize.query(`
      CREATE TABLE webhook_deliveries (
        id               TEXT PRIMARY KEY CHECK (id !~ ':' AND id !~ '^[0-9]+$'),
        endpoint_id      INTEGER REFERENCES webhook_endpoints (id) ON DELETE SET NULL,
        user_id          INTEGER REFERENCES users (user_id) ON DELETE SET NULL,
        url              TEXT NOT NULL,
        method           VARCHAR(10) NOT NULL DEFAULT 'POST',
        event            TEXT,
        body             TEXT NOT NULL,
        headers          JSONB NOT NULL DEFAULT '{}',
        secret           TEXT,
        algo             VARCHAR(10) NOT NULL DEFAULT 'sha256' CHECK (algo IN ('sha256', 'sha384', 'sha512')),
        signature_header TEXT NOT NULL DEFAULT 'X-Signature',
        status           VARCHAR(16) NOT NULL DEFAULT 'pending'
                         CHECK (status IN ('pending', 'delivering', 'succeeded', 'failed')),
        attempts         INTEGER NOT NULL DEFAULT 0,
        next_attempt_at  TIMESTAMPTZ,
        last_status_code INTEGER,
        last_error       TEXT,
        enqueued_at      TIMESTAMPTZ,
        delivered_at     TIMESTAMPTZ,
        created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
        updated_at       TIMESTAMPTZ NOT NULL DEFAULT now()
      );
      CREATE INDEX webhook_deliveries_unqueued_idx ON webhook_deliveries (created_at)
        WHERE status = 'pending' AND enqueued_at IS NULL;
      CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, created_at DESC);
      CREATE INDEX webhook_deliveries_status_idx ON webhook_deliveries (status, next_attempt_at);

      CREATE TABLE webhook_attempts (
        id             BIGSERIAL PRIMARY KEY,
        delivery_id    TEXT NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
        attempt_number INTEGER NOT NULL,
        status_code    INTEGER,
        error          TEXT,
        duration_ms    INTEGER NOT NULL,
        response_body  TEXT,
        attempted_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
        CONSTRAINT webhook_attempts_delivery_number_key UNIQUE (delivery_id, attempt_number)
      );
    `);
  },

  async down(queryInterface) {
    await queryInterface.sequelize.query('DROP TABLE IF EXISTS webhook_attempts; DROP TABLE IF EXISTS webhook_deliveries');
  },
};
