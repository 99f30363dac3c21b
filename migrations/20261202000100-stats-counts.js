'use strict';

/**
 * Stats kept as attempts are recorded (docs/design.md §3, §14), so no stats read scans the
 * attempt log.
 *
 * - webhook_stats: per endpoint and UTC interval (`span_minutes` 1, 10 or 60: a minute, ten
 *   minutes, an hour; `start` on the interval's first instant), the attempts `succeeded`, `retried` and
 *   `failed` by the outcome rules, `cancelled` deliveries apart, and `durations`, a sparse
 *   histogram of the attempts' durations as text, `bucket:attempts` pairs apart by spaces
 *   (read and merged as text: the cheapest to send and join), the bucket
 *   webhook_duration_bucket(ms) (log-spaced, gamma 1.1; -1 holds 0 ms).
 * - webhook_stats_deltas: signed changes, appended by the triggers below in the statement
 *   that makes them (insert only: no row is hot), folded into webhook_stats by the worker's
 *   fold job; reads add the rows not folded yet, so every figure is exact at once.
 * - webhook_stats_failed: the deliveries whose last attempt counts as `failed` (status
 *   `failed`, last attempt not 2xx), with that attempt's endpoint and minute, so a change of
 *   either moves that one attempt between `failed` and `retried` exactly once.
 * - webhook_stats_last: each endpoint's last success and failure, kept when the log's days
 *   are dropped.
 *
 * What moves a count, each in the writing statement's transaction: an attempt row inserted
 * (only rows actually inserted: a duplicate ignored by ON CONFLICT is no row of the
 * transition table), `succeeded` for a 2xx and `retried` otherwise; a delivery entering or
 * leaving `failed` (exhausted, a 410, a redelivery or recovery, a deleted endpoint or a
 * missing event), and an attempt added to a failed delivery: its last attempt between
 * `retried` and `failed`, settled by webhook_stats_settle against webhook_stats_failed.
 *
 * `up` runs in one transaction holding off writers of attempts and deliveries (SHARE
 * locks), and folds every attempt the log holds into webhook_stats by the same rules, so no
 * figure drops at the upgrade (one pass over the log: fine for the sizes this project
 * runs at). `down` drops the triggers, functions and tables.
 */
module.exports = {
  async up(queryInterface) {
    await queryInterface.sequelize.transaction(async (transaction) => {
      await queryInterface.sequelize.query(
        `
        LOCK TABLE webhook_deliveries, webhook_attempts IN SHARE MODE;

        CREATE TABLE webhook_stats (
          endpoint_id  INTEGER NOT NULL,
          span_minutes SMALLINT NOT NULL CHECK (span_minutes IN (1, 10, 60)),
          start        TIMESTAMPTZ NOT NULL,
          succeeded    INTEGER NOT NULL DEFAULT 0,
          retried      INTEGER NOT NULL DEFAULT 0,
          failed       INTEGER NOT NULL DEFAULT 0,
          cancelled    INTEGER NOT NULL DEFAULT 0,
          durations    TEXT NOT NULL DEFAULT '',
          PRIMARY KEY (endpoint_id, span_minutes, start)
        );
        CREATE INDEX webhook_stats_start_idx ON webhook_stats (span_minutes, start);

        CREATE TABLE webhook_stats_deltas (
          endpoint_id INTEGER NOT NULL,
          minute      TIMESTAMPTZ NOT NULL,
          succeeded   INTEGER NOT NULL DEFAULT 0,
          retried     INTEGER NOT NULL DEFAULT 0,
          failed      INTEGER NOT NULL DEFAULT 0,
          cancelled   INTEGER NOT NULL DEFAULT 0,
          bucket      SMALLINT,
          success_at  TIMESTAMPTZ,
          failure_at  TIMESTAMPTZ
        );

        CREATE TABLE webhook_stats_failed (
          delivery_id TEXT PRIMARY KEY,
          endpoint_id INTEGER NOT NULL,
          minute      TIMESTAMPTZ NOT NULL
        );
        CREATE INDEX webhook_stats_failed_minute_idx ON webhook_stats_failed (minute);

        CREATE TABLE webhook_stats_last (
          endpoint_id     INTEGER PRIMARY KEY,
          last_success_at TIMESTAMPTZ,
          last_failure_at TIMESTAMPTZ
        );

        CREATE FUNCTION webhook_duration_bucket(ms integer) RETURNS smallint
          LANGUAGE sql IMMUTABLE PARALLEL SAFE
          AS $$ SELECT CASE WHEN ms <= 0 THEN -1 ELSE ceil(ln(ms) / ln(1.1))::smallint END $$;

        -- PL/pgSQL, planned once per connection (an SQL body holding an aggregate is never inlined).
        CREATE FUNCTION webhook_durations_merge(a text, b text) RETURNS text
          LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
        BEGIN
          RETURN (SELECT COALESCE(string_agg(k || ':' || n, ' ' ORDER BY k), '')
                    FROM (SELECT split_part(e, ':', 1)::int AS k, sum(split_part(e, ':', 2)::bigint) AS n
                            FROM unnest(string_to_array(a || ' ' || b, ' ')) AS e WHERE e <> '' GROUP BY 1) AS s);
        END $$;

        -- Settles the failed mark of the given deliveries against what they are now: a delivery
        -- 'failed' whose last attempt is not 2xx holds one mark; a mark that goes (or moves)
        -- turns its attempt back into 'retried', a mark that comes turns its attempt 'failed'.
        CREATE FUNCTION webhook_stats_settle(ids text[], keys timestamptz[]) RETURNS void
          LANGUAGE plpgsql VOLATILE AS $$
        BEGIN
          WITH d AS (
            SELECT w.id, w.endpoint_id, w.status, w.created_at
              FROM unnest(ids, keys) AS k(id, created_at) CROSS JOIN LATERAL (
                SELECT x.id, x.endpoint_id, x.status, x.created_at FROM webhook_deliveries x
                 WHERE x.id = k.id AND x.created_at = k.created_at LIMIT 1) AS w
          ), fresh AS (
            SELECT d.id AS delivery_id, d.endpoint_id, date_bin('1 minute', l.attempted_at, timestamptz 'epoch') AS minute
              FROM d CROSS JOIN LATERAL (
                SELECT a.status_code, a.attempted_at FROM webhook_attempts a
                 WHERE a.delivery_id = d.id AND a.delivery_created_at IN (d.created_at, '-infinity')
                 ORDER BY a.attempt_number DESC LIMIT 1) AS l
             WHERE d.status = 'failed' AND d.endpoint_id IS NOT NULL AND NOT COALESCE(l.status_code BETWEEN 200 AND 299, false)
          ), old AS (
            SELECT m.* FROM webhook_stats_failed m WHERE m.delivery_id IN (SELECT id FROM d)
          ), gone AS (
            SELECT o.* FROM old o WHERE NOT EXISTS (
              SELECT 1 FROM fresh f WHERE f.delivery_id = o.delivery_id AND f.endpoint_id = o.endpoint_id AND f.minute = o.minute)
          ), came AS (
            SELECT f.* FROM fresh f WHERE NOT EXISTS (
              SELECT 1 FROM old o WHERE o.delivery_id = f.delivery_id AND o.endpoint_id = f.endpoint_id AND o.minute = f.minute)
          ), unmark AS (
            DELETE FROM webhook_stats_failed m USING gone g
             WHERE m.delivery_id = g.delivery_id AND NOT EXISTS (SELECT 1 FROM came c WHERE c.delivery_id = g.delivery_id)
          ), mark AS (
            INSERT INTO webhook_stats_failed (delivery_id, endpoint_id, minute) SELECT delivery_id, endpoint_id, minute FROM came
            ON CONFLICT (delivery_id) DO UPDATE SET endpoint_id = excluded.endpoint_id, minute = excluded.minute
          )
          INSERT INTO webhook_stats_deltas (endpoint_id, minute, retried, failed)
          SELECT endpoint_id, minute, 1, -1 FROM gone
          UNION ALL
          SELECT endpoint_id, minute, -1, 1 FROM came;
        END $$;

        -- Each attempt's delivery is looked up by its key (LATERAL ... LIMIT 1: an index probe of
        -- one partition per row, whatever the planner guesses of the transition table's size).
        CREATE FUNCTION webhook_stats_attempted() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
          failed_ids text[];
          failed_keys timestamptz[];
        BEGIN
          WITH a AS (
            SELECT n.delivery_id, n.attempted_at, n.duration_ms, COALESCE(n.status_code BETWEEN 200 AND 299, false) AS ok,
                   d.endpoint_id, d.status, d.created_at
              FROM webhook_attempts_inserted n CROSS JOIN LATERAL (
                SELECT w.endpoint_id, w.status, w.created_at FROM webhook_deliveries w
                 WHERE w.id = n.delivery_id AND w.created_at = n.delivery_created_at LIMIT 1) AS d
             WHERE d.endpoint_id IS NOT NULL
          ), deltas AS (
            INSERT INTO webhook_stats_deltas (endpoint_id, minute, succeeded, retried, bucket, success_at, failure_at)
            SELECT endpoint_id, date_bin('1 minute', attempted_at, timestamptz 'epoch'), ok::int, (NOT ok)::int,
                   webhook_duration_bucket(duration_ms), CASE WHEN ok THEN attempted_at END, CASE WHEN NOT ok THEN attempted_at END
              FROM a
          )
          SELECT array_agg(delivery_id), array_agg(created_at) INTO failed_ids, failed_keys
            FROM (SELECT DISTINCT delivery_id, created_at FROM a WHERE status = 'failed') AS f;
          IF failed_ids IS NOT NULL THEN
            PERFORM webhook_stats_settle(failed_ids, failed_keys);
          END IF;
          RETURN NULL;
        END $$;
        CREATE TRIGGER webhook_stats_attempted AFTER INSERT ON webhook_attempts
          REFERENCING NEW TABLE AS webhook_attempts_inserted FOR EACH STATEMENT EXECUTE FUNCTION webhook_stats_attempted();

        CREATE FUNCTION webhook_stats_status() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          PERFORM webhook_stats_settle(ARRAY[NEW.id], ARRAY[NEW.created_at]);
          RETURN NULL;
        END $$;
        CREATE TRIGGER webhook_stats_status AFTER UPDATE OF status ON webhook_deliveries
          FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status AND 'failed' IN (OLD.status, NEW.status))
          EXECUTE FUNCTION webhook_stats_status();

        WITH a AS (
          SELECT d.endpoint_id, date_bin('1 minute', a.attempted_at, timestamptz 'epoch') AS minute, a.attempted_at,
                 webhook_duration_bucket(a.duration_ms) AS bucket,
                 COALESCE(a.status_code BETWEEN 200 AND 299, false) AS ok,
                 d.status IN ('pending', 'delivering')
                   OR lead(a.attempt_number) OVER (PARTITION BY a.delivery_id ORDER BY a.attempt_number) IS NOT NULL AS again
            FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id
           WHERE d.endpoint_id IS NOT NULL
        ), spans AS (
          SELECT a.*, s.span_minutes, date_bin(s.span_minutes * interval '1 minute', a.attempted_at, timestamptz 'epoch') AS start
            FROM a CROSS JOIN (VALUES (1::smallint), (10::smallint), (60::smallint)) AS s(span_minutes)
        ), per_bucket AS (
          SELECT endpoint_id, span_minutes, start, bucket,
                 count(*) FILTER (WHERE ok) AS succeeded,
                 count(*) FILTER (WHERE NOT ok AND again) AS retried,
                 count(*) FILTER (WHERE NOT ok AND NOT again) AS failed,
                 count(*) AS n
            FROM spans GROUP BY endpoint_id, span_minutes, start, bucket
        )
        INSERT INTO webhook_stats (endpoint_id, span_minutes, start, succeeded, retried, failed, durations)
        SELECT endpoint_id, span_minutes, start, sum(succeeded), sum(retried), sum(failed), string_agg(bucket || ':' || n, ' ' ORDER BY bucket)
          FROM per_bucket GROUP BY endpoint_id, span_minutes, start;

        INSERT INTO webhook_stats_failed (delivery_id, endpoint_id, minute)
        SELECT d.id, d.endpoint_id, date_bin('1 minute', l.attempted_at, timestamptz 'epoch')
          FROM webhook_deliveries d CROSS JOIN LATERAL (
            SELECT a.status_code, a.attempted_at FROM webhook_attempts a WHERE a.delivery_id = d.id
             ORDER BY a.attempt_number DESC LIMIT 1) AS l
         WHERE d.status = 'failed' AND d.endpoint_id IS NOT NULL AND NOT COALESCE(l.status_code BETWEEN 200 AND 299, false);

        INSERT INTO webhook_stats_last (endpoint_id, last_success_at, last_failure_at)
        SELECT d.endpoint_id,
               max(a.attempted_at) FILTER (WHERE a.status_code BETWEEN 200 AND 299),
               max(a.attempted_at) FILTER (WHERE a.status_code IS NULL OR a.status_code NOT BETWEEN 200 AND 299)
          FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id
         WHERE d.endpoint_id IS NOT NULL
         GROUP BY d.endpoint_id;
        `,
        { transaction },
      );
    });
  },

  async down(queryInterface) {
    await queryInterface.sequelize.query(`
      DROP TRIGGER IF EXISTS webhook_stats_attempted ON webhook_attempts;
      DROP TRIGGER IF EXISTS webhook_stats_status ON webhook_deliveries;
      DROP FUNCTION IF EXISTS webhook_stats_attempted();
      DROP FUNCTION IF EXISTS webhook_stats_status();
      DROP FUNCTION IF EXISTS webhook_stats_settle(text[], timestamptz[]);
      DROP FUNCTION IF EXISTS webhook_durations_merge(text, text);
      DROP FUNCTION IF EXISTS webhook_duration_bucket(integer);
      DROP TABLE IF EXISTS webhook_stats, webhook_stats_deltas, webhook_stats_failed, webhook_stats_last;
    `);
  },
};
