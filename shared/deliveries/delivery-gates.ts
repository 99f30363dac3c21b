import type { Sequelize } from 'sequelize';
import { findByIds, keyRange } from '../db/partitions';
import { rawQuery } from '../db/raw-query';
import { gateKeyOf } from '../endpoint-gate/gate-keys';

/**
 * The gate keys (shared/endpoint-gate `gateKeyOf`) of delivery rows, read from the rows: with
 * several queue partitions a job's gate key picks its partition.
 *
 * @returns delivery id to gate key; a row that is gone has none
 */
export async function gateKeysOf(sequelize: Sequelize, ids: readonly string[]): Promise<Map<string, string>> {
  const rows = await findByIds(ids, (some, keys) =>
    rawQuery<{ id: string; endpoint_id: number | null; url: string }>(sequelize, {
      name: 'outbox-gate-keys',
      text: `SELECT id, endpoint_id, url FROM webhook_deliveries WHERE id = ANY($1::text[]) AND ${keyRange('created_at', '$2', '$3')}`,
      values: [some, ...keys],
    }),
  );
  return new Map(rows.map((row) => [row.id, gateKeyOf({ endpointId: row.endpoint_id, url: row.url })]));
}
