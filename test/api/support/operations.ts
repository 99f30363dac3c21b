import { createHash, randomBytes } from 'node:crypto';
import { QueryTypes } from 'sequelize';
import type { Database } from '../../../shared/db';
import { ensureDays, idAt } from '../../support/partitions';

/** A service key for tests, and its Authorization header. */
export interface TestServiceKey {
  id: number;
  key: string;
  headers: Record<string, string>;
}

/** Inserts a service key with `scopes` (docs/design.md §4: stored as the sha256 hex of the key). */
export async function createServiceKey(db: Database, scopes: string[] = ['*']): Promise<TestServiceKey> {
  const key = `sk_${randomBytes(32).toString('base64url')}`;
  const [{ id }] = await db.sequelize.query<{ id: number }>(
    'INSERT INTO service_keys (name, key_hash, scopes) VALUES ($1, $2, $3) RETURNING id',
    { bind: [`test ${scopes.join(' ')}`, createHash('sha256').update(key).digest('hex'), scopes], type: QueryTypes.SELECT },
  );
  return { id, key, headers: { authorization: `Bearer ${key}` } };
}

/** Inserts a delivery row as the outbox would, for list and ownership tests; returns its id. */
export async function insertDelivery(
  db: Database,
  fields: { endpointId?: number | null; event?: string; status?: string; createdAt?: Date; url?: string; id?: string } = {},
): Promise<string> {
  // Its created_at is its id's time (docs/design.md §3.4), in a day partition made for it if need be.
  const createdAt = fields.createdAt ?? new Date();
  const id = fields.id ?? idAt('msg_', createdAt);
  await ensureDays(db.sequelize, createdAt);
  await db.sequelize.query(
    `INSERT INTO webhook_deliveries (id, endpoint_id, url, event, body, status, created_at, updated_at)
     VALUES ($1, $2, $3, $4, '{}', $5, $6, now())`,
    {
      bind: [id, fields.endpointId ?? null, fields.url ?? 'http://127.0.0.1:9/hook', fields.event ?? 'post.created', fields.status ?? 'succeeded', createdAt],
    },
  );
  return id;
}
