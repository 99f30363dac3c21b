import { QueryTypes, Sequelize } from 'sequelize';
import type { DeliveryStatus } from '../../../shared/db';
import type { HmacAlgo } from '../../../shared/webhook/signing';

/** A delivery claimed for one attempt, with its endpoint's current (and rotating-out) secret. */
export interface ClaimedDelivery {
  id: string;
  endpointId: number | null;
  url: string;
  method: string;
  body: string;
  headers: Record<string, string>;
  secret: string | null;
  algo: HmacAlgo;
  signatureHeader: string;
  /** Attempts recorded so far; this one is number `attempts + 1`. */
  attempts: number;
  endpointSecret: string | null;
  /** The endpoint's secret before its last rotation, while its overlap lasts; else null. */
  endpointPreviousSecret: string | null;
  endpointActive: boolean | null;
}

/** One finished attempt and the delivery state it leads to, written together. */
export interface AttemptRecord {
  deliveryId: string;
  attemptNumber: number;
  statusCode: number | null;
  error: string | null;
  durationMs: number;
  response: string | null;
  status: DeliveryStatus;
  nextAttemptAt: Date | null;
  /** Set to disable the delivery's endpoint with this reason (410 Gone). */
  disableEndpointId: number | null;
  disabledReason: string | null;
}

export interface DeliveryStore {
  /**
   * Marks a delivery `delivering` and loads it with its endpoint, in one statement. A
   * `deliver` job claims only a pending (or interrupted `delivering`) delivery whose
   * next attempt is due, with 1 s of clock tolerance; a one-shot redelivery skips the time
   * check.
   * @returns null when there is nothing to attempt now
   */
  claim(deliveryId: string, oneShot: boolean): Promise<ClaimedDelivery | null>;
  /** Status and due time of a delivery that could not be claimed; null when it does not exist. */
  peek(deliveryId: string): Promise<{ status: DeliveryStatus; nextAttemptAt: Date | null } | null>;
  /** Writes the webhook_attempts row, the delivery's new state and, on 410, the endpoint's, in one statement. */
  recordAttempt(record: AttemptRecord): Promise<void>;
  /** Fails a delivery without an HTTP attempt (disabled endpoint, unusable secret). */
  failWithoutAttempt(deliveryId: string, reason: string): Promise<void>;
}

interface ClaimRow {
  id: string;
  endpoint_id: number | null;
  url: string;
  method: string;
  body: string;
  headers: Record<string, string>;
  secret: string | null;
  algo: HmacAlgo;
  signature_header: string;
  attempts: number;
  endpoint_secret: string | null;
  endpoint_previous_secret: string | null;
  endpoint_active: boolean | null;
}

const CLAIM_SQL = `
  WITH d AS (
    UPDATE webhook_deliveries SET status = 'delivering', updated_at = now()
     WHERE id = $1 AND status IN ('pending', 'delivering')
       AND ($2 OR next_attempt_at IS NULL OR next_attempt_at <= now() + interval '1 second')
    RETURNING id, endpoint_id, url, method, body, headers, secret, algo, signature_header, attempts
  )
  SELECT d.*, e.secret AS endpoint_secret, e.active AS endpoint_active,
         CASE WHEN e.previous_secret_expires_at > now() THEN e.previous_secret END AS endpoint_previous_secret
    FROM d LEFT JOIN webhook_endpoints e ON e.id = d.endpoint_id`;

// Data-modifying CTEs always run, so the attempt, the endpoint and the delivery change in one
// round trip. A duplicate attempt number (a job re-run after a crash mid-record) is ignored.
const RECORD_SQL = `
  WITH attempt AS (
    INSERT INTO webhook_attempts (delivery_id, attempt_number, status_code, error, duration_ms, response_body)
    VALUES ($1, $2, $3::int, $4::text, $5, $6::text)
    ON CONFLICT (delivery_id, attempt_number) DO NOTHING
  ), endpoint AS (
    UPDATE webhook_endpoints SET active = false, disabled_reason = $10::text, updated_at = now()
     WHERE id = $9::int
  )
  UPDATE webhook_deliveries
     SET status = $7::text, attempts = GREATEST(attempts, $2), next_attempt_at = $8::timestamptz,
         last_status_code = $3::int, last_error = $4::text,
         delivered_at = CASE WHEN $7::text = 'succeeded' THEN now() ELSE delivered_at END, updated_at = now()
   WHERE id = $1`;

/** The worker's SQL: two statements per attempt (claim, record), nothing more on the hot path. */
export function createDeliveryStore(sequelize: Sequelize): DeliveryStore {
  return {
    async claim(deliveryId, oneShot) {
      const rows = await sequelize.query<ClaimRow>(CLAIM_SQL, { bind: [deliveryId, oneShot], type: QueryTypes.SELECT });
      const row = rows[0];
      if (!row) return null;
      return {
        id: row.id,
        endpointId: row.endpoint_id,
        url: row.url,
        method: row.method,
        body: row.body,
        headers: row.headers,
        secret: row.secret,
        algo: row.algo,
        signatureHeader: row.signature_header,
        attempts: row.attempts,
        endpointSecret: row.endpoint_secret,
        endpointPreviousSecret: row.endpoint_previous_secret,
        endpointActive: row.endpoint_active,
      };
    },

    async peek(deliveryId) {
      const rows = await sequelize.query<{ status: DeliveryStatus; next_attempt_at: Date | null }>(
        'SELECT status, next_attempt_at FROM webhook_deliveries WHERE id = $1',
        { bind: [deliveryId], type: QueryTypes.SELECT },
      );
      return rows[0] ? { status: rows[0].status, nextAttemptAt: rows[0].next_attempt_at } : null;
    },

    async recordAttempt(record) {
      await sequelize.query(RECORD_SQL, {
        bind: [
          record.deliveryId,
          record.attemptNumber,
          record.statusCode,
          record.error,
          record.durationMs,
          // PostgreSQL text cannot hold NUL; a binary answer keeps the rest of its excerpt.
          record.response?.replace(/\u0000/g, '') ?? null,
          record.status,
          record.nextAttemptAt,
          record.disableEndpointId,
          record.disabledReason,
        ],
      });
    },

    async failWithoutAttempt(deliveryId, reason) {
      await sequelize.query(
        `UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL, last_error = $2, updated_at = now()
          WHERE id = $1`,
        { bind: [deliveryId, reason] },
      );
    },
  };
}
