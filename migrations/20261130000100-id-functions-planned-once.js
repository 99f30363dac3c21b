'use strict';

/**
 * The id functions every write calls, made cheap to call (bench/RESULTS.md, issue 29).
 *
 * PostgreSQL runs an SQL-language function that it cannot inline by parsing and planning its
 * body again in every statement that calls it; a create paid that twice (the event's id and
 * its delivery's), a claim and a record once or twice (`webhook_key_hi`), up to 90 µs each.
 * - `webhook_key_hi(t)` could not be inlined: `timestamptz - interval` is only STABLE, and an
 *   IMMUTABLE function's body must be immutable to be inlined. Its body now holds the bound
 *   less one microsecond as a constant, so the planner inlines it like `webhook_key_lo`.
 * - `webhook_new_id(prefix[, at])` is VOLATILE and reads its UUID twice, so it can never be
 *   inlined: it becomes PL/pgSQL, whose plan each connection makes once. Same ids, same
 *   format (prefix and the base64url of a UUIDv7, RFC 9562 §5.7).
 *
 * Down restores the SQL bodies.
 */
const NEW_ID_AT_BODY = `
  DECLARE
    b bytea := overlay(uuid_send(gen_random_uuid())
                       PLACING substring(int8send(floor(extract(epoch FROM at) * 1000)::bigint) FROM 3)
                       FROM 1 FOR 6);
  BEGIN
    RETURN prefix || rtrim(translate(encode(set_byte(b, 6, (get_byte(b, 6) & 15) | 112), 'base64'), '+/', '-_'), '=');
  END`;

/** The SQL body both versions had before, drawing the id at `time`. */
const sqlNewId = (time) => `
  SELECT prefix || rtrim(translate(encode(set_byte(b, 6, (get_byte(b, 6) & 15) | 112), 'base64'), '+/', '-_'), '=')
    FROM (SELECT overlay(uuid_send(gen_random_uuid())
                         PLACING substring(int8send(floor(extract(epoch FROM ${time}) * 1000)::bigint) FROM 3)
                         FROM 1 FOR 6) AS b) AS fresh`;

/** The legacy bound of the day-partitions migration, and the last microsecond before it. */
async function bounds(sequelize, transaction) {
  const [row] = await sequelize.query(
    `SELECT to_char(webhook_legacy_bound() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS bound,
            to_char((webhook_legacy_bound() - interval '1 microsecond') AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS before`,
    { transaction, type: 'SELECT', raw: true },
  );
  return row;
}

module.exports = {
  async up(queryInterface) {
    const { sequelize } = queryInterface;
    await sequelize.transaction(async (transaction) => {
      const { bound, before } = await bounds(sequelize, transaction);
      await sequelize.query(
        `
        CREATE OR REPLACE FUNCTION webhook_key_hi(t timestamptz) RETURNS timestamptz LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
          SELECT CASE WHEN t >= timestamptz '${bound}' THEN t ELSE timestamptz '${before}' END
        $$;
        CREATE OR REPLACE FUNCTION webhook_new_id(prefix text, at timestamptz) RETURNS text LANGUAGE plpgsql VOLATILE PARALLEL SAFE AS $$${NEW_ID_AT_BODY}
        $$;
        CREATE OR REPLACE FUNCTION webhook_new_id(prefix text) RETURNS text LANGUAGE plpgsql VOLATILE PARALLEL SAFE AS $$
          BEGIN
            RETURN webhook_new_id(prefix, clock_timestamp());
          END
        $$;`,
        { transaction, raw: true },
      );
    });
  },

  async down(queryInterface) {
    const { sequelize } = queryInterface;
    await sequelize.transaction(async (transaction) => {
      const { bound } = await bounds(sequelize, transaction);
      await sequelize.query(
        `
        CREATE OR REPLACE FUNCTION webhook_key_hi(t timestamptz) RETURNS timestamptz LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
          SELECT CASE WHEN t >= timestamptz '${bound}' THEN t ELSE timestamptz '${bound}' - interval '1 microsecond' END
        $$;
        CREATE OR REPLACE FUNCTION webhook_new_id(prefix text, at timestamptz) RETURNS text LANGUAGE sql VOLATILE PARALLEL SAFE AS $$${sqlNewId('at')}
        $$;
        CREATE OR REPLACE FUNCTION webhook_new_id(prefix text) RETURNS text LANGUAGE sql VOLATILE PARALLEL SAFE AS $$${sqlNewId('clock_timestamp()')}
        $$;`,
        { transaction, raw: true },
      );
    });
  },
};
