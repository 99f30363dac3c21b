import { QueryTypes } from 'sequelize';
import type { Database, DeliveryStatus } from '../db';
import { findById, keyOfId } from '../db/partitions';
import { maskedUrl } from '../http/url-display';
import { Page, decodeCursor, toPage } from './cursor';
import type { Viewer } from './viewer';

/** A delivery as the operations API shows it (docs/design.md §11.1); never its body, headers or secret. */
export interface DeliveryObject {
  /** The webhook-id. */
  id: string;
  /** Null for an ad-hoc send. */
  endpoint_id: number | null;
  /** The event it delivers; null for a delivery made before events were stored once. */
  event_id: string | null;
  url: string;
  event: string | null;
  status: DeliveryStatus;
  attempt_count: number;
  next_attempt_at: string | null;
  last_status_code: number | null;
  last_error: string | null;
  created_at: string;
  delivered_at: string | null;
}

/** One HTTP attempt (docs/design.md §11.1); `response_excerpt` is the first 2 KB of the answer. */
export interface AttemptObject {
  number: number;
  /** Where the attempt went: its endpoint's URL when it started; null for attempts recorded before attempts kept theirs. */
  url: string | null;
  status_code: number | null;
  error: string | null;
  duration_ms: number;
  response_excerpt: string | null;
  created_at: string;
}

/** `GET /webhooks/{id}`: the delivery with its attempts, oldest first. */
export interface DeliveryDetails extends DeliveryObject {
  attempts: AttemptObject[];
}

/** Filters of `GET /webhooks`; `since`/`until` bound `created_at` (inclusive). */
export interface DeliveryFilters {
  status?: DeliveryStatus;
  event?: string;
  endpointId?: number;
  since?: Date;
  until?: Date;
  limit: number;
  cursor?: string;
}

interface DeliveryRow {
  id: string;
  endpoint_id: number | null;
  event_id: string | null;
  url: string;
  event: string | null;
  status: DeliveryStatus;
  attempts: number;
  next_attempt_at: Date | null;
  last_status_code: number | null;
  last_error: string | null;
  created_at: Date;
  delivered_at: Date | null;
  created_at_micros: string;
}

const DELIVERY_COLUMNS = `d.id, d.endpoint_id, d.event_id, d.url, d.event, d.status, d.attempts, d.next_attempt_at, d.last_status_code,
  d.last_error, d.created_at, d.delivered_at, (extract(epoch FROM d.created_at) * 1000000)::bigint::text AS created_at_micros`;

/**
 * SQL restricting deliveries `d` to what the viewer may see: everything for an operator; for a
 * user, deliveries to their own endpoints that still exist (never an operator endpoint's, and
 * never an ad-hoc send). Pushes its parameter onto `bind`.
 */
export function visibleDeliveries(viewer: Viewer, bind: unknown[]): string {
  if (viewer.operator) return 'true';
  return `d.endpoint_id IN (SELECT id FROM webhook_endpoints WHERE user_id = $${bind.push(viewer.userId)} AND deleted_at IS NULL)`;
}

/**
 * Deliveries the viewer may see, newest first by (created_at, id), a page of `limit` after
 * `cursor`. The keyset cursor never skips or repeats a row, whatever is inserted meanwhile.
 *
 * @throws InvalidCursorError for a cursor this API did not hand out
 */
export async function listDeliveries(db: Database, viewer: Viewer, filters: DeliveryFilters): Promise<Page<DeliveryObject>> {
  const bind: unknown[] = [filters.limit + 1];
  const where = [visibleDeliveries(viewer, bind)];
  if (filters.status) where.push(`d.status = $${bind.push(filters.status)}`);
  if (filters.event) where.push(`d.event = $${bind.push(filters.event)}`);
  if (filters.endpointId !== undefined) where.push(`d.endpoint_id = $${bind.push(filters.endpointId)}`);
  if (filters.since) where.push(`d.created_at >= $${bind.push(filters.since)}`);
  if (filters.until) where.push(`d.created_at <= $${bind.push(filters.until)}`);
  if (filters.cursor) {
    const keyset = decodeCursor(filters.cursor);
    where.push(
      `(d.created_at, d.id) < ('epoch'::timestamptz + $${bind.push(keyset.createdAtMicros)}::bigint * interval '1 microsecond', $${bind.push(keyset.id)}::text)`,
    );
  }
  const rows = await db.sequelize.query<DeliveryRow>(
    `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries d WHERE ${where.join(' AND ')}
      ORDER BY d.created_at DESC, d.id DESC LIMIT $1`,
    { bind, type: QueryTypes.SELECT },
  );
  return toPage(rows, filters.limit, (row) => row.id, presentDelivery);
}

/** The delivery with its attempts, or null when there is none the viewer may see. */
export async function getDeliveryDetails(db: Database, id: string, viewer: Viewer): Promise<DeliveryDetails | null> {
  const [row] = await findById(id, (key) => {
    const bind: unknown[] = [id, key];
    return db.sequelize.query<DeliveryRow>(
      `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries d WHERE d.id = $1 AND ${keyOfId('d.created_at', '$2')} AND ${visibleDeliveries(viewer, bind)}`,
      { bind, type: QueryTypes.SELECT },
    );
  });
  if (!row) return null;
  const attempts = await db.sequelize.query<{
    attempt_number: number;
    status_code: number | null;
    error: string | null;
    duration_ms: number;
    response_body: string | null;
    attempted_at: Date;
    url: string | null;
  }>(
    `SELECT attempt_number, status_code, error, duration_ms, response_body, attempted_at, url
       FROM webhook_attempts WHERE delivery_id = $1 AND ${keyOfId('delivery_created_at', '$2')} ORDER BY attempt_number`,
    // The delivery's own key: its attempts share its partition, the legacy one for a legacy row.
    { bind: [id, row.created_at], type: QueryTypes.SELECT },
  );
  return {
    ...presentDelivery(row),
    attempts: attempts.map((attempt) => ({
      number: attempt.attempt_number,
      url: attempt.url === null ? null : maskedUrl(attempt.url),
      status_code: attempt.status_code,
      error: attempt.error,
      duration_ms: attempt.duration_ms,
      response_excerpt: attempt.response_body,
      created_at: new Date(attempt.attempted_at).toISOString(),
    })),
  };
}

function presentDelivery(row: DeliveryRow): DeliveryObject {
  return {
    id: row.id,
    endpoint_id: row.endpoint_id,
    event_id: row.event_id,
    url: maskedUrl(row.url),
    event: row.event,
    status: row.status,
    attempt_count: row.attempts,
    next_attempt_at: isoOrNull(row.next_attempt_at),
    last_status_code: row.last_status_code,
    last_error: row.last_error,
    created_at: new Date(row.created_at).toISOString(),
    delivered_at: isoOrNull(row.delivered_at),
  };
}

function isoOrNull(value: Date | null): string | null {
  return value === null ? null : new Date(value).toISOString();
}
