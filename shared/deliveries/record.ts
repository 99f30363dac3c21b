import { failedAttemptSet } from './episodes';
import { disablesEndpoint } from './endpoint-disable';
import { keyOfId, keyRange } from '../db/partitions';

/**
 * The worker's record of an attempt (docs/design.md §3.4, §6.3): the attempt row, the delivery's new state
 * and the endpoint's failure episode in one statement, and a batch of successes in another.
 */

/** The endpoint is disabled by this attempt: 410 ($10), or failing (and unchanged) for longer than $11 seconds. */
const DISABLES = disablesEndpoint('e', { succeeded: '$9::boolean', goneReason: '$10::text', disableAfterS: '$11::int' });

/** What {@link RECORD} answers. */
export interface RecordRow {
  disable_due: boolean;
  found: boolean;
  /** The attempt row was written now (not a duplicate). */
  attempted: boolean;
  /** A success's endpoint has this episode open: close it. */
  open_episode: string | null;
  /** The endpoint's `origin_epoch` now (null: no endpoint row): the attempt's own, unless it moved meanwhile. */
  origin_epoch: number | null;
}

// Data-modifying CTEs always run, so the attempt, the endpoint's failure episode and the
// delivery change in one round trip. The attempt's URL ($15) becomes the delivery's: a
// delivery shows where its latest attempt went. What the attempt says of its endpoint (the
// episode, a disable, a success's episode to close) counts only while the endpoint's
// `origin_epoch` is still the one the attempt started with ($16): an answer from an origin
// the endpoint has since left is not the endpoint's. A success writes no endpoint row here: it reports the
// episode it finds open, which the store then closes. Disabling the endpoint is left to
// endpoint-disable.ts, which this statement reports as due. A duplicate attempt number (a job
// re-run after a crash mid-record) is ignored and counts no failure. No foreign key ties an
// attempt to its delivery (docs/design.md §3): the attempt is written only for a delivery the
// statement found, and none (a delivery gone meanwhile) is reported.
export const RECORD = {
  name: 'webhook_worker_record',
  text: `
  WITH delivery AS (
    UPDATE webhook_deliveries
       SET status = $7::text, attempts = GREATEST(attempts, $2), next_attempt_at = $8::timestamptz,
           last_status_code = $3::int, last_error = $4::text, one_shot = false, url = $15::text,
           delivered_at = CASE WHEN $7::text = 'succeeded' THEN now() ELSE delivered_at END, updated_at = now()
     WHERE id = $1 AND ${keyOfId('created_at', '$14')}
    RETURNING id
  ), attempt AS (
    INSERT INTO webhook_attempts (delivery_id, attempt_number, status_code, error, duration_ms, response_body, delivery_created_at, url)
    SELECT $1, $2, $3::int, $4::text, $5, $6::text, $13::timestamptz, $15::text FROM delivery
    ON CONFLICT (delivery_id, attempt_number, delivery_created_at) DO NOTHING
    RETURNING 1
  ), health AS (
    UPDATE webhook_endpoints e SET ${failedAttemptSet('e', { statusCode: '$3::int', error: '$4::text' })}
     WHERE e.id = $12::int AND e.origin_epoch = $16::int AND NOT $9::boolean AND EXISTS (SELECT 1 FROM attempt)
  )
  SELECT COALESCE((SELECT ${DISABLES} FROM webhook_endpoints e WHERE e.id = $12::int AND e.origin_epoch = $16::int), false) AS disable_due,
         EXISTS (SELECT 1 FROM delivery) AS found, EXISTS (SELECT 1 FROM attempt) AS attempted,
         (SELECT e.episode_id FROM webhook_endpoints e WHERE e.id = $12::int AND e.origin_epoch = $16::int AND $9::boolean) AS open_episode,
         (SELECT e.origin_epoch FROM webhook_endpoints e WHERE e.id = $12::int) AS origin_epoch`,
};

// The common case, a 2xx, for a batch of attempts at once: $1..$7 and $10, $11 one array
// entry per attempt (its URL, and the origin epoch it started with, as for RECORD). A success never disables an endpoint and writes no endpoint row: it reports its
// endpoint's open failure episode, if any, which the store then closes (a healthy endpoint
// costs a primary-key read in this same statement).
export const RECORD_SUCCESSES = {
  name: 'webhook_worker_record_successes',
  text: `
  WITH r AS (
    SELECT * FROM unnest($1::text[], $2::int[], $3::int[], $4::int[], $5::text[], $6::int[], $7::timestamptz[], $10::text[], $11::int[])
      AS r(delivery_id, attempt_number, status_code, duration_ms, response_body, endpoint_id, delivery_created_at, url, origin_epoch)
  ), done AS (
    UPDATE webhook_deliveries w
       SET status = 'succeeded', attempts = GREATEST(w.attempts, r.attempt_number), next_attempt_at = NULL,
           last_status_code = r.status_code, last_error = NULL, one_shot = false, url = r.url, delivered_at = now(), updated_at = now()
      FROM r
     WHERE w.id = r.delivery_id AND ${keyRange('w.created_at', '$8', '$9')}
    RETURNING w.id
  ), attempt AS (
    INSERT INTO webhook_attempts (delivery_id, attempt_number, status_code, duration_ms, response_body, delivery_created_at, url)
    SELECT r.delivery_id, r.attempt_number, r.status_code, r.duration_ms, r.response_body, r.delivery_created_at, r.url FROM r JOIN done ON done.id = r.delivery_id
    ON CONFLICT (delivery_id, attempt_number, delivery_created_at) DO NOTHING
  )
  SELECT done.id, CASE WHEN e.origin_epoch = r.origin_epoch THEN e.episode_id END AS episode_id, e.origin_epoch
    FROM done JOIN r ON r.delivery_id = done.id LEFT JOIN webhook_endpoints e ON e.id = r.endpoint_id`,
};

