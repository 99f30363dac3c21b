import { QueryTypes, Sequelize } from 'sequelize';
import { idTime } from '../webhook/ids';

/**
 * The day partitions of docs/design.md §3.4, as every query sees them: `webhook_events` and
 * `webhook_deliveries` by `created_at`, `webhook_attempts` by `delivery_created_at`, one
 * partition per UTC day, and a legacy partition holding the rows written before the migration
 * (migrations/20261126000100-day-partitions.js).
 *
 * A row's id says where it lives: a new row's `created_at` is its id's UUIDv7 millisecond, so a
 * lookup by id names that value and PostgreSQL plans one partition. The SQL functions
 * `webhook_key_lo(t)` and `webhook_key_hi(t)` turn an id's time `t` (NULL for an id without
 * one) into the range holding its row: `[t, t]`, or the legacy partition's range for an id made
 * before the migration. They are IMMUTABLE: with the times bound as values the planner folds
 * them and prunes at plan time. This file is the one place that knows it.
 */

/** Days ahead of today (UTC) whose partitions every api and worker keeps (docs/design.md §3.4). */
export const PARTITION_HORIZON_DAYS = 7;

/**
 * The partition key of the row an id names: its UUIDv7 time, or null for an id that holds none
 * (an older, random id; looked up in the legacy partition).
 */
export function keyOf(id: string): Date | null {
  return idTime(id);
}

/**
 * The `created_at` a new row with this id must be written with (docs/design.md §3.3).
 *
 * @throws Error for an id that carries no UUIDv7 time: no new row may have one
 */
export function createdAtOf(id: string): Date {
  const at = idTime(id);
  if (!at) throw new Error(`Not a time-ordered id: ${id}`);
  return at;
}

/**
 * The bounds to bind for {@link keyRange} over rows of several ids: the earliest id's time
 * (null when one id has none: the range then starts in the legacy partition) and the latest
 * (null when no id has one).
 */
export function keysOf(ids: readonly string[]): [Date | null, Date | null] {
  let low: Date | null = null;
  let high: Date | null = null;
  let legacy = false;
  for (const id of ids) {
    const at = idTime(id);
    if (!at) {
      legacy = true;
      continue;
    }
    if (!low || at < low) low = at;
    if (!high || at > high) high = at;
  }
  return [legacy ? null : low, high];
}

/**
 * SQL restricting `column` (a partition key) to the rows of the ids whose {@link keysOf} (or
 * {@link keyOf}, twice) are bound at `low` and `high`, such as `$3` and `$4`.
 */
export function keyRange(column: string, low: string, high: string): string {
  return `${column} BETWEEN webhook_key_lo(${low}::timestamptz) AND webhook_key_hi(${high}::timestamptz)`;
}

/** {@link keyRange} for one id whose {@link keyOf} is bound at `param`. */
export function keyOfId(column: string, param: string): string {
  return keyRange(column, param, param);
}

/**
 * The bounds to bind for {@link keyRange} over rows whose partition keys are known (their
 * `created_at`, as read from them): the earliest and the latest. A legacy row's key lies before
 * the legacy bound, where `webhook_key_lo` and `webhook_key_hi` take it to the legacy partition.
 */
export function keysAt(keys: readonly Date[]): [Date | null, Date | null] {
  if (keys.length === 0) return [null, null];
  const times = keys.map((key) => key.getTime());
  return [new Date(Math.min(...times)), new Date(Math.max(...times))];
}

/** The keys that bound for {@link keyRange} (or twice for {@link keyOfId}) name the legacy partition only. */
export const LEGACY_KEYS: [null, null] = [null, null];

/**
 * The one second look in the legacy partition (docs/design.md §3.5): runs `probe`
 * over `ids` in the partitions their ids name and, over those it did not find that read as
 * UUIDv7s, once more in the legacy partition ({@link LEGACY_KEYS}). Legacy ids
 * are random bytes, and one in 64 reads as a UUIDv7 by its version and variant bits, naming
 * a day its row is not in. Rows found at once cost the one probe.
 *
 * @param found - the ids among `ids` that the rows of a probe hold
 * @returns the rows of both probes
 */
async function probeThenLegacy<R>(
  ids: readonly string[],
  probe: (ids: string[], keys: [Date | null, Date | null]) => Promise<R[]>,
  found: (rows: R[], ids: readonly string[]) => Set<string>,
): Promise<R[]> {
  const rows = await probe([...ids], keysOf(ids));
  const hit = found(rows, ids);
  const rest = [...new Set(ids.filter((id) => !hit.has(id) && keyOf(id) !== null))];
  return rest.length === 0 ? rows : [...rows, ...(await probe(rest, LEGACY_KEYS))];
}

/**
 * Runs a lookup of one row by its id: in the partition the id names, then, on a miss, in the
 * legacy one ({@link probeThenLegacy}).
 *
 * @param probe - runs the lookup with `key` bound where {@link keyOfId} expects the id's key
 *   (null: the legacy partition), and returns the rows it found or changed
 */
export async function findById<R>(id: string, probe: (key: Date | null) => Promise<R[]>): Promise<R[]> {
  return probeThenLegacy([id], async (_ids, [key]) => probe(key), (rows) => new Set(rows.length > 0 ? [id] : []));
}

/**
 * {@link findById} for several ids: `probe` runs over all of them with their {@link keysOf},
 * then over those not found in the legacy partition ({@link probeThenLegacy}).
 *
 * @param probe - runs the lookup of `ids` with `keys` bound for {@link keyRange}, and returns
 *   the rows it found or changed, each with its `id`
 * @returns the rows of both probes
 */
export async function findByIds<R extends { id: string }>(
  ids: readonly string[],
  probe: (ids: string[], keys: [Date | null, Date | null]) => Promise<R[]>,
): Promise<R[]> {
  return probeThenLegacy(ids, probe, (rows) => new Set(rows.map((row) => row.id)));
}

/**
 * The legacy partition's retention (docs/design.md §11.7): it is no day, so its rows go the old
 * way, a batch at a time: succeeded deliveries older than the window with their attempts, then
 * the events older than the window that no delivery references any more.
 *
 * @param inBatches - runs a statement binding $1 the retention days and $2 the batch size,
 *   each run deleting one batch and answering `n` (the rows it deleted), until a batch falls
 *   short; resolves to the rows deleted in all
 * @returns the deliveries and events deleted
 */
export async function pruneLegacyPartition(inBatches: (sql: string) => Promise<number>): Promise<{ deliveries: number; events: number }> {
  const deliveries = await inBatches(`
      WITH doomed AS (
        SELECT id, created_at FROM ${legacyPartitionName('webhook_deliveries')}
         WHERE status = 'succeeded' AND created_at < now() - $1 * interval '1 day'
         ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED
      ), attempts AS (
        DELETE FROM ${legacyPartitionName('webhook_attempts')} a USING doomed WHERE a.delivery_id = doomed.id
      ), gone AS (DELETE FROM ${legacyPartitionName('webhook_deliveries')} d USING doomed WHERE d.id = doomed.id AND d.created_at = doomed.created_at RETURNING 1)
      SELECT count(*)::int AS n FROM gone`);
  const events = await inBatches(`
      WITH doomed AS (
        SELECT id, created_at FROM ${legacyPartitionName('webhook_events')} e
         WHERE created_at < now() - $1 * interval '1 day'
           AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id)
         ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED
      ), gone AS (DELETE FROM ${legacyPartitionName('webhook_events')} e USING doomed WHERE e.id = doomed.id AND e.created_at = doomed.created_at RETURNING 1)
      SELECT count(*)::int AS n FROM gone`);
  return { deliveries, events };
}

/**
 * How long making a day may wait for its parent tables' lock, ms. `CREATE TABLE ... PARTITION
 * OF` takes an exclusive lock on the parent, and every statement on the table queues behind
 * it while it waits: it gives up soon, and the next check (a minute at most) tries again.
 */
export const DAY_CREATION_LOCK_TIMEOUT_MS = 1_000;

/** Options of {@link ensureDayPartitions}. */
export interface EnsureDayPartitionsOptions {
  /** The clock: the UTC day of this instant is "today". Default now. */
  now?: Date;
  /** Days ahead of today to cover; default {@link PARTITION_HORIZON_DAYS}. */
  aheadDays?: number;
  /** How long making one day may wait for its locks, ms; default {@link DAY_CREATION_LOCK_TIMEOUT_MS}. */
  lockTimeoutMs?: number;
}

/**
 * Creates the day partitions of the three tables from today (UTC) through today +
 * `aheadDays` that are missing (docs/design.md §3.5). A catalog look finds the missing
 * tables (none, most times: then that look is all it costs). Each is made in a transaction of
 * its own under the lock timeout, so the exclusive lock its parent needs is never held while
 * another is waited for (a statement holding one parent while it waits for another would
 * deadlock with it); one another process made meanwhile counts as made. Days before the legacy
 * bound are the legacy partition's and never made.
 *
 * @returns how many partitions it made
 * @throws the database's error: unreachable, or a lock timeout (SQLSTATE 55P03) when a table
 *   stayed busy; the partitions made before it stay made
 */
export async function ensureDayPartitions(sequelize: Sequelize, options: EnsureDayPartitionsOptions = {}): Promise<number> {
  const today = (options.now ?? new Date()).toISOString().slice(0, 10);
  const lockTimeoutMs = Math.max(1, Math.round(options.lockTimeoutMs ?? DAY_CREATION_LOCK_TIMEOUT_MS));
  const missing = await sequelize.query<{ parent: DayTable; name: string; low: string; high: string }>(
    `SELECT t.parent, t.parent || '_p' || to_char(day, 'YYYYMMDD') AS name,
            to_char(day, 'YYYY-MM-DD') AS low, to_char(day + interval '1 day', 'YYYY-MM-DD') AS high
       FROM generate_series($1::timestamp, $1::timestamp + $2::int * interval '1 day', interval '1 day') AS day
      CROSS JOIN unnest($3::text[]) WITH ORDINALITY AS t(parent, n)
      WHERE day AT TIME ZONE 'UTC' >= webhook_legacy_bound()
        AND to_regclass(t.parent || '_p' || to_char(day, 'YYYYMMDD')) IS NULL
      ORDER BY day, t.n`,
    { bind: [today, options.aheadDays ?? PARTITION_HORIZON_DAYS, DAY_TABLES], type: QueryTypes.SELECT },
  );
  let made = 0;
  for (const { parent, name, low, high } of missing) {
    try {
      await sequelize.transaction(async (transaction) => {
        await sequelize.query(`SET LOCAL lock_timeout = ${lockTimeoutMs}`, { transaction });
        await sequelize.query(`CREATE TABLE ${name} PARTITION OF ${parent} FOR VALUES FROM ('${low} 00:00:00+00') TO ('${high} 00:00:00+00')`, {
          transaction,
        });
      });
      made += 1;
    } catch (error) {
      if (!madeByAnother(error)) throw error;
    }
  }
  return made;
}

/** The table exists already (42P07), or its catalog rows were written by a concurrent CREATE (23505). */
function madeByAnother(error: unknown): boolean {
  const code = (error as { parent?: { code?: string } }).parent?.code;
  return code === '42P07' || code === '23505';
}

/** A table partitioned by UTC day. */
export type DayTable = 'webhook_events' | 'webhook_deliveries' | 'webhook_attempts';

/** The tables partitioned by UTC day, in the order a day's partitions are made. */
const DAY_TABLES: readonly DayTable[] = ['webhook_events', 'webhook_deliveries', 'webhook_attempts'];

/** Milliseconds in a UTC day: the span of one partition. */
export const DAY_MS = 86_400_000;

/** The name of `table`'s partition of the UTC day starting at `day`: `<table>_pYYYYMMDD`. */
export function dayPartitionName(table: DayTable, day: Date): string {
  return `${table}_p${day.toISOString().slice(0, 10).replace(/-/g, '')}`;
}

/** The name of the legacy partition of `table`. */
function legacyPartitionName(table: DayTable): string {
  return `${table}_legacy`;
}

/**
 * The day partitions of `webhook_deliveries` whose whole day ends at or before `before`, oldest
 * first (the legacy partition is not a day and is never listed).
 */
export async function dayPartitionsBefore(sequelize: Sequelize, before: Date): Promise<Date[]> {
  const rows = await sequelize.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
      WHERE i.inhparent = 'webhook_deliveries'::regclass AND c.relname ~ '^webhook_deliveries_p[0-9]{8}$'`,
    { type: QueryTypes.SELECT },
  );
  return rows
    .map((row) => /_p(\d{4})(\d{2})(\d{2})$/.exec(row.name)!)
    .map(([, year, month, day]) => new Date(Date.UTC(Number(year), Number(month) - 1, Number(day))))
    .filter((day) => day.getTime() + DAY_MS <= before.getTime())
    .sort((a, b) => a.getTime() - b.getTime());
}


/**
 * Tables named as day partitions (`<table>_pYYYYMMDD`) that are no partition any more: days a
 * retention pass detached and did not drop (docs/design.md §3.4). Sorted by name, so attempts come
 * before deliveries and deliveries before events.
 */
export async function detachedDayTables(sequelize: Sequelize): Promise<string[]> {
  const rows = await sequelize.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_class c
      WHERE c.relkind = 'r' AND NOT c.relispartition AND c.relnamespace = current_schema()::regnamespace
        AND c.relname ~ '^webhook_(attempts|deliveries|events)_p[0-9]{8}$'
      ORDER BY c.relname`,
    { type: QueryTypes.SELECT },
  );
  return rows.map((row) => row.name);
}
