import { ConnectionError, QueryTypes, Sequelize } from 'sequelize';
import { isDatabaseUnavailable, type DeliveryStatus, type EndpointAuth } from '../../../shared/db';
import { createGroupCommit } from '../../../shared/db/group-commit';
import { RawStatement, rawQuery } from '../../../shared/db/raw-query';
import { announceExhausted } from '../../../shared/deliveries/delivery-exhausted';
import { announceFailing, closeEpisode, failedAttemptSet } from '../../../shared/deliveries/episodes';
import { disableEndpoint, disablesEndpoint } from './endpoint-disable';
import { DeliveryGoneError } from './errors';
import type { HmacAlgo } from '../../../shared/webhook/signing';
import { findById, findByIds, keyOf, keyOfId, keyRange, keysAt, keysOf } from '../../../shared/db/partitions';

/** A delivery claimed for one attempt, with its endpoint's current (and rotating-out) secret. */
export interface ClaimedDelivery {
  id: string;
  endpointId: number | null;
  url: string;
  method: string;
  /** The exact bytes to send, from its event (DESIGN §3); null when that event row is missing. */
  body: string | null;
  /** The delivery's own headers (an ad-hoc send's), over its endpoint's static headers (DESIGN §14). */
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
  /** The delivery's endpoint was deleted: it must not be signed with the derived secret. */
  endpointDeleted: boolean;
  /** The row's `created_at`: its partition key, which its attempts carry (DESIGN §3). */
  createdAt: Date;
  /** Exactly one attempt (a redelivery), whatever its outcome. */
  oneShot: boolean;
  /** Place in its FIFO endpoint's order (DESIGN §6); null for other endpoints. */
  sequence: string | null;
  /** The endpoint's `rate_limit_per_s` (DESIGN §14); null: none. */
  rateLimitPerS: number | null;
  /** The endpoint's URL now (a delivery keeps the one it was made for): its credentials go to this origin only. */
  endpointUrl: string | null;
  /** The endpoint's OAuth2 client credentials (DESIGN §14, revision 4); null: none. */
  auth: EndpointAuth | null;
  /** The endpoint's PEM client certificate and key for mutual TLS; null: none. */
  clientCertificate: { cert: string; key: string } | null;
}

/** What a job learns of a delivery it could not claim. */
export interface DeliveryState {
  status: DeliveryStatus;
  nextAttemptAt: Date | null;
  /** A FIFO delivery with an earlier one of its endpoint still pending or delivering: it must wait its turn. */
  queuedBehind: boolean;
}

/** One finished attempt and the delivery state it leads to, written together. */
export interface AttemptRecord {
  deliveryId: string;
  /** The delivery's `created_at` ({@link ClaimedDelivery.createdAt}): the attempt row's partition key. */
  deliveryCreatedAt: Date;
  attemptNumber: number;
  statusCode: number | null;
  error: string | null;
  durationMs: number;
  response: string | null;
  status: DeliveryStatus;
  nextAttemptAt: Date | null;
  /** The delivery's endpoint, whose health (failing since, auto-disable) the attempt updates; null for ad-hoc. */
  endpointId: number | null;
  /** The attempt succeeded (2xx): the endpoint is healthy again. */
  succeeded: boolean;
  /** Set to disable the endpoint at once with this reason (410 Gone); null otherwise. */
  goneReason: string | null;
  /**
   * The delivery ends `failed` with every attempt used: `delivery.exhausted` is written with
   * the attempt (DESIGN §6 rev 4), unless the delivery is one of an operational event.
   */
  exhausted: boolean;
}

/** What recording an attempt changed beyond the delivery. */
export interface RecordResult {
  /**
   * Deliveries of the operational events the record wrote (queue them): `endpoint.disabled`,
   * `delivery.exhausted`, `endpoint.recovered` (DESIGN §6 rev 4).
   */
  noticeIds: string[];
  /** The endpoint was disabled by this record: its reason; else null. */
  disabledReason: string | null;
}

export interface DeliveryStore {
  /**
   * Marks a delivery `delivering` and loads it with its endpoint, in one statement. A
   * `deliver` job claims only a pending (or interrupted `delivering`) delivery whose
   * next attempt is due, with 1 s of clock tolerance; a one-shot redelivery skips the time
   * check. A delivery to a FIFO endpoint is claimed only at the head of its endpoint's line:
   * no earlier one (by sequence) still pending or delivering, one-shot redeliveries aside.
   * @returns null when there is nothing to attempt now
   */
  claim(deliveryId: string, oneShot: boolean): Promise<ClaimedDelivery | null>;
  /** Undoes a claim that made no attempt (the endpoint's cap or circuit said wait): back to `pending`. */
  unclaim(deliveryId: string): Promise<void>;
  /** The state of a delivery that could not be claimed; null when it does not exist. */
  peek(deliveryId: string): Promise<DeliveryState | null>;
  /**
   * The FIFO delivery that comes after `sequence` on the endpoint and has not finished, if any:
   * the one to wake when the delivery at `sequence` (`deliveryId`) ends (DESIGN §6). It is
   * looked for among rows made from a day before that one on.
   */
  nextInLine(endpointId: number, sequence: string, deliveryId: string): Promise<string | null>;
  /**
   * Writes, in one statement: the webhook_attempts row, the delivery's new state and, for a
   * failed attempt, the endpoint's failure episode (shared/deliveries/episodes.ts). When the
   * attempt disables the endpoint, its `disabled_reason` and the `endpoint.disabled` event are
   * written too (endpoint-disable.ts): for 410 Gone in one transaction with the attempt; for
   * failing with no success for WEBHOOK_DISABLE_AFTER_S (rare) in a transaction of their own
   * right after it. An exhausted delivery's `delivery.exhausted` is written in one transaction
   * with its last attempt. Successes of concurrent jobs share one statement; one that finds
   * its endpoint's episode open closes it after (`endpoint.recovered`), once per process.
   * @throws DeliveryGoneError when the delivery no longer exists (nothing is written)
   */
  recordAttempt(record: AttemptRecord): Promise<RecordResult>;
  /**
   * The endpoint's circuit opened: `endpoint.failing`, the first time in its open episode
   * (shared/deliveries/episodes.ts `announceFailing`).
   * @returns the deliveries of the event (queue them); none when it was announced already
   */
  circuitOpened(endpointId: number): Promise<string[]>;
  /** Fails a delivery without an HTTP attempt (disabled or deleted endpoint, unusable secret). */
  failWithoutAttempt(deliveryId: string, reason: string): Promise<void>;
}

interface ClaimRow {
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
}

/**
 * An earlier delivery of w's FIFO endpoint has not finished (a one-shot redelivery never holds
 * the line). Such a row may be of any day: the migration's PL/pgSQL function probes every
 * partition's partial index on a plan of its own, so the claim's planning stays one partition's.
 */
const AHEAD_IN_LINE = `webhook_fifo_ahead(w.endpoint_id, w.sequence)`;

// The worker's hot statements are prepared (named): planning their CTEs cost PostgreSQL twice
// what running them did. Their plans join on primary keys, whatever a batch's size.
// $1 the delivery ids, $2 for each whether it is one-shot (a redelivery or recovery), $3 and $4
// the range of their partition keys (shared/db/partitions.ts), so the plan holds only their
// day's partitions. An event shares its deliveries' millisecond, so the same range finds it;
// a replay's delivery is younger than its event, whose body is then read apart. A claimed row
// is marked enqueued (its job ran), as the api's mark skips rows a claim holds.
const CLAIM_BATCH = {
  name: 'webhook_worker_claim',
  text: `
  WITH c AS (
    SELECT * FROM unnest($1::text[], $2::boolean[]) AS c(id, one_shot)
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
         CASE WHEN e.previous_secret_expires_at > now() THEN e.previous_secret END AS endpoint_previous_secret
    FROM d LEFT JOIN webhook_endpoints e ON e.id = d.endpoint_id
      LEFT JOIN webhook_events ev ON ev.id = d.event_id AND ${keyRange('ev.created_at', '$3', '$4')}`,
};

/** The endpoint is disabled by this attempt: 410 ($10), or failing (and unchanged) for longer than $11 seconds. */
const DISABLES = disablesEndpoint('e', { succeeded: '$9::boolean', goneReason: '$10::text', disableAfterS: '$11::int' });

/** What {@link RECORD} answers. */
interface RecordRow {
  disable_due: boolean;
  found: boolean;
  /** The attempt row was written now (not a duplicate). */
  attempted: boolean;
  /** A success's endpoint has this episode open: close it. */
  open_episode: string | null;
}

// Data-modifying CTEs always run, so the attempt, the endpoint's failure episode and the
// delivery change in one round trip. A success writes no endpoint row here: it reports the
// episode it finds open, which the store then closes. Disabling the endpoint is left to
// endpoint-disable.ts, which this statement reports as due. A duplicate attempt number (a job
// re-run after a crash mid-record) is ignored and counts no failure. No foreign key ties an
// attempt to its delivery (DESIGN §3): the attempt is written only for a delivery the
// statement found, and none (a delivery gone meanwhile) is reported.
const RECORD = {
  name: 'webhook_worker_record',
  text: `
  WITH delivery AS (
    UPDATE webhook_deliveries
       SET status = $7::text, attempts = GREATEST(attempts, $2), next_attempt_at = $8::timestamptz,
           last_status_code = $3::int, last_error = $4::text, one_shot = false,
           delivered_at = CASE WHEN $7::text = 'succeeded' THEN now() ELSE delivered_at END, updated_at = now()
     WHERE id = $1 AND ${keyOfId('created_at', '$14')}
    RETURNING id
  ), attempt AS (
    INSERT INTO webhook_attempts (delivery_id, attempt_number, status_code, error, duration_ms, response_body, delivery_created_at)
    SELECT $1, $2, $3::int, $4::text, $5, $6::text, $13::timestamptz FROM delivery
    ON CONFLICT (delivery_id, attempt_number, delivery_created_at) DO NOTHING
    RETURNING 1
  ), health AS (
    UPDATE webhook_endpoints e SET ${failedAttemptSet('e', { statusCode: '$3::int', error: '$4::text' })}
     WHERE e.id = $12::int AND NOT $9::boolean AND EXISTS (SELECT 1 FROM attempt)
  )
  SELECT COALESCE((SELECT ${DISABLES} FROM webhook_endpoints e WHERE e.id = $12::int), false) AS disable_due,
         EXISTS (SELECT 1 FROM delivery) AS found, EXISTS (SELECT 1 FROM attempt) AS attempted,
         (SELECT e.episode_id FROM webhook_endpoints e WHERE e.id = $12::int AND $9::boolean) AS open_episode`,
};

// The common case, a 2xx, for a batch of attempts at once: $1..$6 one array entry per
// attempt. A success never disables an endpoint and writes no endpoint row: it reports its
// endpoint's open failure episode, if any, which the store then closes (a healthy endpoint
// costs a primary-key read in this same statement).
const RECORD_SUCCESSES = {
  name: 'webhook_worker_record_successes',
  text: `
  WITH r AS (
    SELECT * FROM unnest($1::text[], $2::int[], $3::int[], $4::int[], $5::text[], $6::int[], $7::timestamptz[])
      AS r(delivery_id, attempt_number, status_code, duration_ms, response_body, endpoint_id, delivery_created_at)
  ), done AS (
    UPDATE webhook_deliveries w
       SET status = 'succeeded', attempts = GREATEST(w.attempts, r.attempt_number), next_attempt_at = NULL,
           last_status_code = r.status_code, last_error = NULL, one_shot = false, delivered_at = now(), updated_at = now()
      FROM r
     WHERE w.id = r.delivery_id AND ${keyRange('w.created_at', '$8', '$9')}
    RETURNING w.id
  ), attempt AS (
    INSERT INTO webhook_attempts (delivery_id, attempt_number, status_code, duration_ms, response_body, delivery_created_at)
    SELECT r.delivery_id, r.attempt_number, r.status_code, r.duration_ms, r.response_body, r.delivery_created_at FROM r JOIN done ON done.id = r.delivery_id
    ON CONFLICT (delivery_id, attempt_number, delivery_created_at) DO NOTHING
  )
  SELECT done.id, e.episode_id FROM done JOIN r ON r.delivery_id = done.id LEFT JOIN webhook_endpoints e ON e.id = r.endpoint_id`,
};

/**
 * The claim of a batch of deliveries as the store runs it (a prepared statement): exported so
 * tests can show its plan holds only the batch's day partitions (DESIGN §3).
 *
 * @param keys - the partition keys to bind; default the ids' own ({@link keysOf})
 */
export function claimStatement(
  claims: readonly { deliveryId: string; oneShot: boolean }[],
  keys: [Date | null, Date | null] = keysOf(claims.map((claim) => claim.deliveryId)),
): RawStatement {
  return { ...CLAIM_BATCH, values: [claims.map((claim) => claim.deliveryId), claims.map((claim) => claim.oneShot), ...keys] };
}

function toClaimedDelivery(row: ClaimRow): ClaimedDelivery {
  return {
    id: row.id,
    createdAt: row.created_at,
    endpointId: row.endpoint_id,
    url: row.url,
    method: row.method,
    body: row.body,
    headers: { ...row.endpoint_headers, ...row.headers },
    secret: row.secret,
    algo: row.algo,
    signatureHeader: row.signature_header,
    attempts: row.attempts,
    endpointSecret: row.endpoint_secret,
    endpointPreviousSecret: row.endpoint_previous_secret,
    endpointActive: row.endpoint_active,
    endpointDeleted: row.endpoint_deleted,
    oneShot: row.one_shot,
    sequence: row.sequence,
    rateLimitPerS: row.endpoint_rate_limit_per_s,
    endpointUrl: row.endpoint_url,
    auth: row.endpoint_auth,
    clientCertificate: row.endpoint_client_cert !== null && row.endpoint_client_key !== null ? { cert: row.endpoint_client_cert, key: row.endpoint_client_key } : null,
  };
}

/**
 * Whether a database error postpones the attempt without counting it (DESIGN §6, Recovery):
 * PostgreSQL unreachable (shared/db `isDatabaseUnavailable`), and also any failure to connect
 * at all, a wrong password included: an api request must answer now, a job can wait until
 * the database is fixed.
 */
export function postponesAttempt(error: unknown): boolean {
  return error instanceof ConnectionError || isDatabaseUnavailable(error);
}

/**
 * The worker's SQL, on prepared statements: per attempt a claim and a record, each shared
 * with the concurrent jobs of this process (group commit) where the statement allows it.
 *
 * @param options.disableAfterS - WEBHOOK_DISABLE_AFTER_S
 */
export function createDeliveryStore(sequelize: Sequelize, options: { disableAfterS: number }): DeliveryStore {
  const disableAfterS = options.disableAfterS;

  /**
   * Runs the jobs' items of a batch as one statement; should it fail for another reason than
   * PostgreSQL being away, each item is tried alone, so an error reaches only its own job.
   */
  function batched<I, R>(run: (items: I[]) => Promise<R[]>) {
    return createGroupCommit<I, R>(async (batch) => (await run(batch)).map((value) => ({ ok: true as const, value })), {
      retryAlone: (error) => !postponesAttempt(error),
    });
  }

  /** The bodies of events older than their claimed deliveries (replays), by a lookup of their own; null for an event row missing. */
  async function withBodies(rows: ClaimRow[]): Promise<ClaimRow[]> {
    const missing = [...new Set(rows.flatMap((row) => (row.body === null && row.event_id !== null ? [row.event_id] : [])))];
    if (missing.length === 0) return rows;
    const events = await findByIds(missing, (ids, keys) =>
      rawQuery<{ id: string; body: string }>(sequelize, {
        text: `SELECT id, body FROM webhook_events WHERE id = ANY($1::text[]) AND ${keyRange('created_at', '$2', '$3')}`,
        values: [ids, ...keys],
      }),
    );
    const bodies = new Map(events.map((event) => [event.id, event.body]));
    return rows.map((row) => ({ ...row, body: row.body ?? bodies.get(row.event_id ?? '') ?? null }));
  }

  const claims = batched<{ deliveryId: string; oneShot: boolean }, ClaimedDelivery | null>(async (batch) => {
    // A legacy id that reads as a UUIDv7 is looked for again in the legacy partition (DESIGN §3).
    const rows = await findByIds(batch.map((claim) => claim.deliveryId), (ids, keys) =>
      rawQuery<ClaimRow>(sequelize, claimStatement(batch.filter((claim) => ids.includes(claim.deliveryId)), keys)),
    );
    const claimed = new Map((await withBodies(rows)).map((row) => [row.id, toClaimedDelivery(row)]));
    return batch.map((claim) => claimed.get(claim.deliveryId) ?? null);
  });

  /** Per success recorded, its endpoint's open episode (null: none). */
  const successes = createGroupCommit<AttemptRecord, { openEpisode: string | null }>(async (batch) => {
    const done = await rawQuery<{ id: string; episode_id: string | null }>(sequelize, {
      ...RECORD_SUCCESSES,
      values: [
        batch.map((record) => record.deliveryId),
        batch.map((record) => record.attemptNumber),
        batch.map((record) => record.statusCode),
        batch.map((record) => record.durationMs),
        batch.map((record) => storableText(record.response)),
        batch.map((record) => record.endpointId),
        batch.map((record) => record.deliveryCreatedAt),
        ...keysAt(batch.map((record) => record.deliveryCreatedAt)),
      ],
    });
    const found = new Map(done.map((row) => [row.id, row.episode_id]));
    return batch.map((record) =>
      found.has(record.deliveryId)
        ? { ok: true as const, value: { openEpisode: found.get(record.deliveryId) ?? null } }
        : { ok: false as const, error: new DeliveryGoneError(record.deliveryId) },
    );
  }, { retryAlone: (error) => !postponesAttempt(error) });

  /** Episodes this process is closing, by endpoint and episode: the successes of one batch close each once. */
  const closing = new Map<string, Promise<unknown>>();

  /**
   * Closes the episode a success found open (its own transaction, after the success
   * committed): `endpoint.recovered` when the episode announced failing or disabled. Should the
   * process die in between, the endpoint's next success closes it.
   * @returns the deliveries of `endpoint.recovered` (none when another success closes it)
   */
  async function endEpisode(endpointId: number, episodeId: string, statusCode: number | null): Promise<string[]> {
    const key = `${endpointId} ${episodeId}`;
    const running = closing.get(key);
    if (running) {
      // Its own success is recorded: should that close fail, the endpoint's next success closes it.
      await running.catch(() => undefined);
      return [];
    }
    const close = sequelize.transaction((transaction) =>
      closeEpisode(sequelize, transaction, { endpointId, episodeId, reason: `attempt succeeded with HTTP ${statusCode}` }),
    );
    closing.set(key, close);
    try {
      return (await close).map((job) => job.deliveryId);
    } finally {
      closing.delete(key);
    }
  }

  /** RECORD alone, or with what must commit with it: a 410 Gone's disable, an exhaustion's event. */
  async function writeRecord(record: AttemptRecord, values: unknown[]): Promise<{ row: RecordRow; result: RecordResult }> {
    const { endpointId, goneReason } = record;
    const gone = goneReason !== null && endpointId !== null;
    if (!gone && !record.exhausted) {
      const [row] = await rawQuery<RecordRow>(sequelize, { ...RECORD, values });
      if (!row?.found) throw new DeliveryGoneError(record.deliveryId);
      return { row, result: { noticeIds: [], disabledReason: null } };
    }
    return sequelize.transaction(async (transaction) => {
      const [row] = await sequelize.query<RecordRow>(RECORD.text, { bind: values, type: QueryTypes.SELECT, transaction });
      if (!row?.found) throw new DeliveryGoneError(record.deliveryId);
      // Only the transaction that wrote the last attempt announces it, once.
      const exhausted = record.exhausted && row.attempted ? await announceExhausted(sequelize, transaction, record.deliveryId) : [];
      const disabled = gone ? await disableEndpoint(sequelize, { endpointId, goneReason, disableAfterS }, transaction) : { noticeIds: [], disabledReason: null };
      return { row, result: { noticeIds: [...disabled.noticeIds, ...exhausted.map((job) => job.deliveryId)], disabledReason: disabled.disabledReason } };
    });
  }

  return {
    claim: (deliveryId, oneShot) => claims.submit({ deliveryId, oneShot }),

    async unclaim(deliveryId) {
      await findById(deliveryId, (key) =>
        sequelize.query<{ id: string }>(
          `UPDATE webhook_deliveries SET status = 'pending', updated_at = now() WHERE id = $1 AND ${keyOfId('created_at', '$2')} AND status = 'delivering' RETURNING id`,
          { bind: [deliveryId, key], type: QueryTypes.SELECT },
        ),
      );
    },

    async peek(deliveryId) {
      const rows = await findById(deliveryId, (key) =>
        sequelize.query<{ status: DeliveryStatus; next_attempt_at: Date | null; queued_behind: boolean }>(
          `SELECT w.status, w.next_attempt_at,
                  (w.sequence IS NOT NULL AND NOT w.one_shot AND w.status IN ('pending', 'delivering') AND ${AHEAD_IN_LINE}) AS queued_behind
             FROM webhook_deliveries w WHERE w.id = $1 AND ${keyOfId('w.created_at', '$2')}`,
          { bind: [deliveryId, key], type: QueryTypes.SELECT },
        ),
      );
      const row = rows[0];
      return row ? { status: row.status, nextAttemptAt: row.next_attempt_at, queuedBehind: row.queued_behind } : null;
    },

    async nextInLine(endpointId, sequence, deliveryId) {
      // A later sequence was written after this row's transaction committed; its id (its day)
      // was drawn before its insert, so a day of slack covers any wait for the endpoint's lock.
      const at = keyOf(deliveryId);
      const from = at ? new Date(at.getTime() - NEXT_IN_LINE_SLACK_MS) : null;
      const rows = await sequelize.query<{ id: string }>(
        `SELECT id FROM webhook_deliveries
          WHERE endpoint_id = $1 AND sequence > $2 AND status IN ('pending', 'delivering') AND NOT one_shot
            AND ${keyRange('created_at', '$3', '$4')}
          ORDER BY sequence LIMIT 1`,
        { bind: [endpointId, sequence, from, new Date(Date.now() + NEXT_IN_LINE_SLACK_MS)], type: QueryTypes.SELECT },
      );
      return rows[0]?.id ?? null;
    },

    async recordAttempt(record) {
      if (record.succeeded && record.status === 'succeeded' && record.goneReason === null) {
        const { openEpisode } = await successes.submit(record);
        if (openEpisode === null || record.endpointId === null) return { noticeIds: [], disabledReason: null };
        return { noticeIds: await endEpisode(record.endpointId, openEpisode, record.statusCode), disabledReason: null };
      }
      const values = [
        record.deliveryId,
        record.attemptNumber,
        record.statusCode,
        record.error,
        record.durationMs,
        storableText(record.response),
        record.status,
        record.nextAttemptAt,
        record.succeeded,
        record.goneReason,
        disableAfterS,
        record.endpointId,
        record.deliveryCreatedAt,
        // The row's own key, as claimed: a legacy row's lies in the legacy partition whatever its id reads as.
        record.deliveryCreatedAt,
      ];
      const { endpointId } = record;
      const { row, result } = await writeRecord(record, values);
      if (row.open_episode !== null && endpointId !== null) {
        return { ...result, noticeIds: [...result.noticeIds, ...(await endEpisode(endpointId, row.open_episode, record.statusCode))] };
      }
      if (!row.disable_due || endpointId === null || record.goneReason !== null) return result;
      // Rare, so a transaction of its own after the record: should the process die between
      // the two, the endpoint's next failed attempt finds the disable due again.
      const disabled = await disableEndpoint(sequelize, { endpointId, goneReason: null, disableAfterS });
      return { noticeIds: [...result.noticeIds, ...disabled.noticeIds], disabledReason: disabled.disabledReason };
    },

    async circuitOpened(endpointId) {
      return (await announceFailing(sequelize, endpointId)).map((job) => job.deliveryId);
    },

    async failWithoutAttempt(deliveryId, reason) {
      await findById(deliveryId, (key) =>
        sequelize.query<{ id: string }>(
          `UPDATE webhook_deliveries SET status = 'failed', next_attempt_at = NULL, last_error = $2, one_shot = false, updated_at = now()
            WHERE id = $1 AND ${keyOfId('created_at', '$3')} RETURNING id`,
          { bind: [deliveryId, reason, key], type: QueryTypes.SELECT },
        ),
      );
    },
  };
}

/** How far before a FIFO delivery's own day {@link DeliveryStore.nextInLine} looks, and after now, ms. */
const NEXT_IN_LINE_SLACK_MS = 86_400_000;

/** PostgreSQL text cannot hold NUL; a binary answer keeps the rest of its excerpt. */
function storableText(text: string | null): string | null {
  return text?.replace(/\u0000/g, '') ?? null;
}
