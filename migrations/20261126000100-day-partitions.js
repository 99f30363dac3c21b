'use strict';

/**
 * Day partitions (docs/design.md §3.4, storage at scale). `webhook_events` and
 * `webhook_deliveries` become range-partitioned by UTC day of `created_at`, `webhook_attempts`
 * by its delivery's `created_at` (the new `delivery_created_at`), so a delivery and its
 * attempts share a day and retention drops whole days (§11.7).
 *
 * The old tables become the legacy partition of each, FROM MINVALUE TO the legacy bound: the
 * start of the UTC day after the migration (or after their newest row, should one be dated
 * later) when they hold rows, else the unix epoch (a new database needs no legacy range). Nothing is copied: each table gets the partition column in
 * its primary key (one index build), a CHECK matching the bound (one scan, so ATTACH does not
 * scan again), and is attached with its indexes, constraints and foreign keys as they are.
 * Attempts made before the migration get `delivery_created_at` '-infinity' (a constant
 * default, no rewrite): they live in the legacy partition, which is all a lookup needs.
 *
 * Functions (IMMUTABLE, so the planner folds them into constants and prunes partitions at plan
 * time):
 * - `webhook_legacy_bound()`: the bound, a constant.
 * - `webhook_id_time(id)`: the UUIDv7 milliseconds of a `msg_`/`evt_` id made in SQL; every
 *   new row's `created_at` is its id's time.
 * - `webhook_key_lo(t)`, `webhook_key_hi(t)`: the `created_at` range holding the row of an id
 *   made at `t` (the id's time, NULL for an id without one): `[t, t]` from the bound on, the
 *   legacy partition's range before it (rows written before the migration have a `created_at`
 *   of their own, not their id's time).
 * - `webhook_new_id(prefix, at)`: an id made at a given time, so an event's deliveries share
 *   its millisecond, and so its day.
 * - `webhook_fifo_ahead(endpoint, sequence)`: whether an earlier delivery of a FIFO endpoint
 *   is unfinished. Such a row may sit in any day, so the probe spans every partition; in
 *   PL/pgSQL its plan is made once per connection, not within each claim's planning.
 * - `webhook_ensure_day_partitions(first, last)`: creates the day partitions of the three
 *   tables for the UTC days first..last that are missing; safe when two processes run it.
 *
 * No foreign key joins the three tables (PostgreSQL cannot drop a partition others
 * reference): attempts → deliveries ON DELETE CASCADE goes; the code deletes attempts itself.
 * Down moves the rows of every day partition back into the legacy tables and restores them.
 */

const TABLES = [
  { name: 'webhook_events', key: 'created_at', pk: ['id'] },
  { name: 'webhook_deliveries', key: 'created_at', pk: ['id'] },
  { name: 'webhook_attempts', key: 'delivery_created_at', pk: ['id'] },
];

const DAY_FUNCTIONS = `
  CREATE FUNCTION webhook_id_time(id text) RETURNS timestamptz LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT to_timestamp(('x' || encode(decode(translate(substr(id, 5, 8), '-_', '+/'), 'base64'), 'hex'))::bit(48)::bigint / 1000.0::float8)
  $$;
  CREATE FUNCTION webhook_key_lo(t timestamptz) RETURNS timestamptz LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN t >= webhook_legacy_bound() THEN t ELSE '-infinity'::timestamptz END
  $$;
  CREATE FUNCTION webhook_new_id(prefix text, at timestamptz) RETURNS text LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
    SELECT prefix || rtrim(translate(encode(set_byte(b, 6, (get_byte(b, 6) & 15) | 112), 'base64'), '+/', '-_'), '=')
      FROM (SELECT overlay(uuid_send(gen_random_uuid())
                           PLACING substring(int8send(floor(extract(epoch FROM at) * 1000)::bigint) FROM 3)
                           FROM 1 FOR 6) AS b) AS fresh
  $$;
  CREATE FUNCTION webhook_fifo_ahead(endpoint integer, seq bigint) RETURNS boolean LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
  BEGIN
    RETURN EXISTS (SELECT 1 FROM webhook_deliveries p
                    WHERE p.endpoint_id = endpoint AND p.sequence < seq
                      AND p.status IN ('pending', 'delivering') AND NOT p.one_shot);
  END $$;
  CREATE FUNCTION webhook_ensure_day_partitions(first_day date, last_day date) RETURNS integer LANGUAGE plpgsql AS $$
  DECLARE
    day date;
    parent text;
    part text;
    made integer := 0;
  BEGIN
    FOR day IN SELECT generate_series(first_day, last_day, interval '1 day')::date LOOP
      CONTINUE WHEN (day::timestamp AT TIME ZONE 'UTC') < webhook_legacy_bound();
      FOREACH parent IN ARRAY ARRAY['webhook_events', 'webhook_deliveries', 'webhook_attempts'] LOOP
        part := parent || '_p' || to_char(day, 'YYYYMMDD');
        CONTINUE WHEN to_regclass(part) IS NOT NULL;
        BEGIN
          EXECUTE format('CREATE TABLE IF NOT EXISTS %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                         part, parent, day::timestamp AT TIME ZONE 'UTC', (day + 1)::timestamp AT TIME ZONE 'UTC');
          made := made + 1;
        EXCEPTION WHEN duplicate_table OR unique_violation THEN
          -- Another process made it between the check and the CREATE.
          NULL;
        END;
      END LOOP;
    END LOOP;
    RETURN made;
  END $$;
`;

module.exports = {
  async up(queryInterface) {
    const { sequelize } = queryInterface;
    await sequelize.transaction(async (transaction) => {
      const run = (sql) => sequelize.query(sql, { transaction, raw: true });
      const rows = async (sql) => (await sequelize.query(sql, { transaction, type: 'SELECT', raw: true }));
      await run(`LOCK TABLE ${TABLES.map((table) => table.name).join(', ')} IN ACCESS EXCLUSIVE MODE`);
      const [{ bound }] = await rows(`
        SELECT to_char(CASE WHEN EXISTS (SELECT 1 FROM webhook_events) OR EXISTS (SELECT 1 FROM webhook_deliveries)
                                 OR EXISTS (SELECT 1 FROM webhook_attempts)
                            THEN date_trunc('day', GREATEST(now(), (SELECT max(created_at) FROM webhook_events),
                                                            (SELECT max(created_at) FROM webhook_deliveries)), 'UTC') + interval '1 day'
                            ELSE 'epoch' END AT TIME ZONE 'UTC',
                       'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS bound`);
      await run(`
        CREATE FUNCTION webhook_legacy_bound() RETURNS timestamptz LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
          SELECT timestamptz '${bound}'
        $$;
        CREATE FUNCTION webhook_key_hi(t timestamptz) RETURNS timestamptz LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
          SELECT CASE WHEN t >= timestamptz '${bound}' THEN t ELSE timestamptz '${bound}' - interval '1 microsecond' END
        $$;
        ${DAY_FUNCTIONS}
        ALTER TABLE webhook_attempts DROP CONSTRAINT webhook_attempts_delivery_id_fkey;
        ALTER TABLE webhook_attempts ADD COLUMN delivery_created_at timestamptz NOT NULL DEFAULT '-infinity';
        ALTER TABLE webhook_attempts ALTER COLUMN delivery_created_at DROP DEFAULT;
        DROP TRIGGER webhook_deliveries_sequence ON webhook_deliveries;`);

      for (const { name, key, pk } of TABLES) {
        const legacy = `${name}_legacy`;
        // Plain indexes and foreign keys as they are now: the parent gets the same, by name, and
        // ATTACH adopts the legacy table's own instead of building or validating them again.
        const indexes = await rows(`
          SELECT i.relname AS name, pg_get_indexdef(i.oid) AS def FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
           WHERE x.indrelid = '${name}'::regclass AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.oid)`);
        const uniques = await rows(`
          SELECT conname AS name, contype AS type, pg_get_constraintdef(oid) AS def FROM pg_constraint
           WHERE conrelid = '${name}'::regclass AND contype IN ('p', 'u', 'f')`);
        const statements = [`ALTER TABLE ${name} RENAME TO ${legacy}`];
        for (const index of indexes) statements.push(`ALTER INDEX ${index.name} RENAME TO ${index.name}_legacy`);
        for (const constraint of uniques.filter((c) => c.type !== 'f')) {
          const columns = constraint.type === 'p' ? [...pk, key] : constraintColumns(constraint.def).concat(key);
          const kind = constraint.type === 'p' ? 'PRIMARY KEY' : 'UNIQUE';
          statements.push(
            `ALTER TABLE ${legacy} DROP CONSTRAINT ${constraint.name}, ADD CONSTRAINT ${legacyName(constraint.name, name)} ${kind} (${columns.join(', ')})`,
          );
        }
        statements.push(
          `ALTER TABLE ${legacy} ADD CONSTRAINT ${legacy}_bound CHECK (${key} < timestamptz '${bound}')`,
          `CREATE TABLE ${name} (LIKE ${legacy} INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE) PARTITION BY RANGE (${key})`,
          `ALTER TABLE ${name} DROP CONSTRAINT ${legacy}_bound`,
        );
        if (key === 'created_at') statements.push(`ALTER TABLE ${name} ALTER COLUMN created_at DROP DEFAULT`);
        for (const constraint of uniques) {
          if (constraint.type === 'f') statements.push(`ALTER TABLE ${name} ADD CONSTRAINT ${constraint.name} ${constraint.def}`);
          else if (constraint.type === 'p') statements.push(`ALTER TABLE ${name} ADD CONSTRAINT ${constraint.name} PRIMARY KEY (${[...pk, key].join(', ')})`);
          else statements.push(`ALTER TABLE ${name} ADD CONSTRAINT ${constraint.name} UNIQUE (${constraintColumns(constraint.def).concat(key).join(', ')})`);
        }
        for (const index of indexes) statements.push(index.def);
        statements.push(`ALTER TABLE ${name} ATTACH PARTITION ${legacy} FOR VALUES FROM (MINVALUE) TO ('${bound}')`);
        await run(statements.join(';\n'));
      }

      await run(`
        ALTER SEQUENCE webhook_attempts_id_seq OWNED BY webhook_attempts.id;
        CREATE TRIGGER webhook_deliveries_sequence BEFORE INSERT ON webhook_deliveries
          FOR EACH ROW WHEN (NEW.endpoint_id IS NOT NULL AND NEW.sequence IS NULL)
          EXECUTE FUNCTION webhook_delivery_sequence();
        SELECT webhook_ensure_day_partitions(GREATEST((now() AT TIME ZONE 'UTC')::date, (webhook_legacy_bound() AT TIME ZONE 'UTC')::date),
                                             (now() AT TIME ZONE 'UTC')::date + 7);`);
    });
  },

  async down(queryInterface) {
    const { sequelize } = queryInterface;
    await sequelize.transaction(async (transaction) => {
      const run = (sql) => sequelize.query(sql, { transaction, raw: true });
      const rows = async (sql) => sequelize.query(sql, { transaction, type: 'SELECT', raw: true });
      await run(`LOCK TABLE ${TABLES.map((table) => table.name).join(', ')} IN ACCESS EXCLUSIVE MODE;
        ALTER SEQUENCE webhook_attempts_id_seq OWNED BY NONE`);
      for (const { name, key, pk } of TABLES) {
        const legacy = `${name}_legacy`;
        const uniques = await rows(`
          SELECT conname AS name, contype AS type, pg_get_constraintdef(oid) AS def FROM pg_constraint
           WHERE conrelid = '${legacy}'::regclass AND contype IN ('p', 'u')`);
        const indexes = await rows(`
          SELECT i.relname AS name FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
           WHERE x.indrelid = '${legacy}'::regclass AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.oid)`);
        const statements = [
          `ALTER TABLE ${name} DETACH PARTITION ${legacy}`,
          `ALTER TABLE ${legacy} DROP CONSTRAINT ${legacy}_bound`,
          // Rows written to the day partitions since: the same columns in the same order (LIKE).
          `INSERT INTO ${legacy} SELECT * FROM ${name}`,
          `DROP TABLE ${name}`,
        ];
        for (const constraint of uniques) {
          const original = constraint.name.replace(`${legacy}_`, `${name}_`);
          const columns = constraintColumns(constraint.def).filter((column) => column !== key);
          const kind = constraint.type === 'p' ? 'PRIMARY KEY' : 'UNIQUE';
          statements.push(`ALTER TABLE ${legacy} DROP CONSTRAINT ${constraint.name}, ADD CONSTRAINT ${original} ${kind} (${(constraint.type === 'p' ? pk : columns).join(', ')})`);
        }
        for (const index of indexes) statements.push(`ALTER INDEX ${index.name} RENAME TO ${index.name.replace(/_legacy$/, '')}`);
        statements.push(`ALTER TABLE ${legacy} RENAME TO ${name}`);
        await run(statements.join(';\n'));
      }
      await run(`
        ALTER SEQUENCE webhook_attempts_id_seq OWNED BY webhook_attempts.id;
        ALTER TABLE webhook_attempts DROP COLUMN delivery_created_at;
        CREATE TRIGGER webhook_deliveries_sequence BEFORE INSERT ON webhook_deliveries
          FOR EACH ROW WHEN (NEW.endpoint_id IS NOT NULL AND NEW.sequence IS NULL)
          EXECUTE FUNCTION webhook_delivery_sequence();
        ALTER TABLE webhook_attempts ADD CONSTRAINT webhook_attempts_delivery_id_fkey
          FOREIGN KEY (delivery_id) REFERENCES webhook_deliveries (id) ON DELETE CASCADE;
        DROP FUNCTION webhook_ensure_day_partitions(date, date);
        DROP FUNCTION webhook_fifo_ahead(integer, bigint);
        DROP FUNCTION webhook_new_id(text, timestamptz);
        DROP FUNCTION webhook_key_hi(timestamptz);
        DROP FUNCTION webhook_key_lo(timestamptz);
        DROP FUNCTION webhook_id_time(text);
        DROP FUNCTION webhook_legacy_bound();`);
    });
  },
};

/** The columns of a `PRIMARY KEY (a, b)` or `UNIQUE (a, b)` definition. */
function constraintColumns(def) {
  return /\(([^)]*)\)/.exec(def)[1].split(',').map((column) => column.trim());
}

/** `webhook_attempts_pkey` → `webhook_attempts_legacy_pkey`. */
function legacyName(constraint, table) {
  return constraint.replace(`${table}_`, `${table}_legacy_`);
}
