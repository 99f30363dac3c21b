import type { EndpointAuth } from '../db';
import { keyRange, keysOf } from '../db/partitions';
import type { RawStatement } from '../db/raw-query';
import type { HmacAlgo } from '../webhook/signing';

/**
 * The worker's claim of a batch of deliveries (docs/design.md §3, §6.3): `pending` (or a stalled
 * `delivering`) rows whose time has come and that no earlier delivery of their FIFO line holds
 * back become `delivering`, read with their event's body and their endpoint's signing and
 * sending settings as they are now (its URL, headers and credentials: attempts follow their
 * endpoint, docs/design.md §6.3) and its origin epoch.
 */

/** A row of {@link claimStatement}. */
export interface ClaimRow {
  id: string;
  event_id: string | null;
  created_at: Date;
  endpoint_id: number | null;
  url: string;
  method: string;
  body: string | null;
  headers: Record<string, string>;
  secret: string | null;
  algo: HmacAlgo;
  signature_header: string;
  attempts: number;
  endpoint_secret: string | null;
  endpoint_headers: Record<string, string> | null;
  endpoint_rate_limit_per_s: number | null;
  endpoint_previous_secret: string | null;
  endpoint_active: boolean | null;
  endpoint_deleted: boolean;
  one_shot: boolean;
  sequence: string | null;
  endpoint_url: string | null;
  endpoint_auth: EndpointAuth | null;
  endpoint_client_cert: string | null;
  endpoint_client_key: string | null;
  endpoint_origin_epoch: number | null;
}

/**
 * An earlier delivery of w's FIFO endpoint has not finished (a one-shot redelivery never holds
 * the line). Such a row may be of any day: the migration's PL/pgSQL function probes every
 * partition's partial index on a plan of its own, so the claim's planning stays one partition's.
 */
export const AHEAD_IN_LINE = `webhook_fifo_ahead(w.endpoint_id, w.sequence)`;

// The worker's hot statements are prepared (named): planning their CTEs cost PostgreSQL twice
// what running them did. Their plans join on primary keys, whatever a batch's size.
// $1 the delivery ids, $2 for each whether it is one-shot (a redelivery or recovery), $3 and $4
// the range of their partition keys (shared/db/partitions.ts), so the plan holds only their
// day's partitions. An event shares its deliveries' millisecond, so the same range finds it;
// a replay's delivery is younger than its event, whose body is then read apart. A claimed row
// is marked enqueued (its job ran), as the api's mark skips rows a claim holds.
// The claim commits without waiting for its WAL to reach disk (set_config(..., true) lasts
// until this statement's own commit): a claim a crash loses leaves its delivery pending, to
// be claimed and sent again, as at-least-once allows (docs/design.md §6.3), while the send no
// longer waits for a flush first. The record, which must last, waits for its own flush, and
// so for the claim's WAL before it.
const CLAIM_BATCH = {
  name: 'webhook_worker_claim',
  text: `
  WITH c AS (
    SELECT * FROM unnest($1::text[], $2::boolean[]) AS c(id, one_shot) WHERE set_config('synchronous_commit', 'off', true) = 'off'
  ), d AS (
    UPDATE webhook_deliveries w SET status = 'delivering', enqueued_at = COALESCE(w.enqueued_at, now()), updated_at = now()
      FROM c
     WHERE w.id = c.id AND ${keyRange('w.created_at', '$3', '$4')} AND w.status IN ('pending', 'delivering')
       AND (c.one_shot OR w.one_shot OR w.next_attempt_at IS NULL OR w.next_attempt_at <= now() + interval '1 second')
       AND (c.one_shot OR w.one_shot OR w.sequence IS NULL OR NOT ${AHEAD_IN_LINE})
    RETURNING w.id, w.created_at, w.endpoint_id, w.url, w.method, w.body AS legacy_body, w.event_id, w.headers, w.secret, w.algo, w.signature_header, w.attempts,
              w.endpoint_deleted, (c.one_shot OR w.one_shot) AS one_shot, w.sequence
  )
  SELECT d.*, COALESCE(d.legacy_body, ev.body) AS body, e.secret AS endpoint_secret, e.headers AS endpoint_headers, e.rate_limit_per_s AS endpoint_rate_limit_per_s,
         e.active AS endpoint_active, e.url AS endpoint_url, e.auth AS endpoint_auth, e.client_cert AS endpoint_client_cert, e.client_key AS endpoint_client_key,
         e.origin_epoch AS endpoint_origin_epoch,
         CASE WHEN e.previous_secret_expires_at > now() THEN e.previous_secret END AS endpoint_previous_secret
    FROM d LEFT JOIN webhook_endpoints e ON e.id = d.endpoint_id
      LEFT JOIN webhook_events ev ON ev.id = d.event_id AND ${keyRange('ev.created_at', '$3', '$4')}`,
};

/**
 * The claim of a batch of deliveries as the store runs it (a prepared statement): exported so
 * tests can show its plan holds only the batch's day partitions (docs/design.md §3.4).
 *
 * @param keys - the partition keys to bind; default the ids' own ({@link keysOf})
 */
export function claimStatement(
  claims: readonly { deliveryId: string; oneShot: boolean }[],
  keys: [Date | null, Date | null] = keysOf(claims.map((claim) => claim.deliveryId)),
): RawStatement {
  return { ...CLAIM_BATCH, values: [claims.map((claim) => claim.deliveryId), claims.map((claim) => claim.oneShot), ...keys] };
}

