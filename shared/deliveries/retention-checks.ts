import { QueryTypes, type Sequelize, type Transaction } from 'sequelize';

/**
 * Whether a day's deliveries (`table`: a day partition of `webhook_deliveries`, attached or
 * detached, by its name) hold a pending or delivering row: retention keeps such a day (docs/design.md
 * §3.5), asking before the detach and again under its locks.
 */
export async function holdsUnfinished(sequelize: Sequelize, table: string, transaction?: Transaction): Promise<boolean> {
  const [row] = await sequelize.query<{ unfinished: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM ${table} WHERE status IN ('pending', 'delivering')) AS unfinished`,
    { type: QueryTypes.SELECT, transaction },
  );
  return row.unfinished;
}

/** How many deliveries a day's table (as {@link holdsUnfinished}) holds, and how many of them failed. */
export async function countOf(sequelize: Sequelize, table: string, transaction?: Transaction): Promise<{ deliveries: number; failed: number }> {
  const [row] = await sequelize.query<{ total: number; failed: number }>(
    `SELECT count(*)::int AS total, (count(*) FILTER (WHERE status = 'failed'))::int AS failed FROM ${table}`,
    { type: QueryTypes.SELECT, transaction },
  );
  return { deliveries: row.total, failed: row.failed };
}
