import type { Sequelize } from 'sequelize';
import { uuidV7Bytes } from '../../shared/webhook/ids';

/** A time-ordered `msg_`/`evt_` id made at `at` (docs/design.md §3.3): a row with it has `created_at` = `at`, to the millisecond. */
export function idAt(prefix: 'msg_' | 'evt_', at: Date): string {
  return `${prefix}${uuidV7Bytes(at.getTime()).toString('base64url')}`;
}

/** Makes the day partitions holding these times, for rows a test dates in the past. */
export async function ensureDays(sequelize: Sequelize, ...times: Date[]): Promise<void> {
  for (const at of times) {
    await sequelize.query(`SELECT webhook_ensure_day_partitions(($1::timestamptz AT TIME ZONE 'UTC')::date, ($1::timestamptz AT TIME ZONE 'UTC')::date)`, { bind: [at] });
  }
}
