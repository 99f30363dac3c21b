import { ConnectionError, QueryTypes, Sequelize } from 'sequelize';
import { isDatabaseUnavailable, type DeliveryStatus, type EndpointAuth } from '../../../shared/db';
import { createGroupCommit } from '../../../shared/db/group-commit';
import { rawQuery } from '../../../shared/db/raw-query';
import { announceExhausted } from '../../../shared/deliveries/delivery-exhausted';
import { announceFailing, closeEpisode } from '../../../shared/deliveries/episodes';
import { AHEAD_IN_LINE, claimStatement, type ClaimRow } from '../../../shared/deliveries/claim';
import { disableEndpoint } from '../../../shared/deliveries/endpoint-disable';
import { RECORD, RECORD_SUCCESSES, type RecordRow } from '../../../shared/deliveries/record';
import { DeliveryGoneError } from './errors';
import type { HmacAlgo } from '../../../shared/webhook/signing';
import { findById, findByIds, keyOf, keyOfId, keyRange, keysAt } from '../../../shared/db/partitions';

/** A delivery claimed for one attempt, with its endpoint's current (and rotating-out) secret. */
export interface ClaimedDelivery {
  id: string;
  endpointId: number | null;
  /**
   * Where this attempt goes: the endpoint's URL as it is now (attempts follow their endpoint,
   * docs/design.md §6.3), or an ad-hoc delivery's own (also a delivery whose endpoint row is gone).
   */
  url: string;
  method: string;
  /** The exact bytes to send, from its event; null when that event row is missing. */
  body: string | null;
  /** The delivery's own headers (an ad-hoc send's), over its endpoint's static headers as they are now. */
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
  /** The row's `created_at`: its partition key, which its attempts carry. */
  createdAt: Date;
  /** Exactly one attempt (a redelivery), whatever its outcome. */
  oneShot: boolean;
  /** Place in its FIFO endpoint's order; null for other endpoints. */
  sequence: string | null;
  /** The endpoint's `rate_limit_per_s`; null: none. */
  rateLimitPerS: number | null;
  /**
   * The endpoint's `origin_epoch` now, which the attempt carries: its answer counts for the
   * endpoint's health only while the endpoint is still at this epoch; null without an endpoint row.
   */
  originEpoch: number | null;
  /** The endpoint's OAuth2 client credentials; null: none. */
  auth: EndpointAuth | null;
  /** The endpoint's PEM client certificate and key for mutual TLS; null: none. */
  clientCertificate: { cert: string; key: string } | null;
  /** The endpoint's type, which picks its destination (destinations/index.ts); `http`, the only one the table holds today. */
  type: string;
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
  /** Where the attempt went ({@link ClaimedDelivery.url}); it becomes the delivery's `url`. */
  url: string;
  /** The origin epoch the attempt started with ({@link ClaimedDelivery.originEpoch}). */
  originEpoch: number | null;
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
   * the attempt (docs/design.md §6.6), unless the delivery is one of an operational event.
   */
  exhausted: boolean;
  /**
   * The delivery holds its FIFO endpoint's line (docs/design.md §6.5): the next in line waits
   * for this record, which then goes at once rather than waiting for company. Default false.
   */
  inLine?: boolean;
}

/** What recording an attempt changed beyond the delivery. */
export interface RecordResult {
  /**
   * Deliveries of the operational events the record wrote (queue them): `endpoint.disabled`,
   * `delivery.exhausted`, `endpoint.recovered` (docs/design.md §6.6).
   */
  noticeIds: string[];
  /** The endpoint was disabled by this record: its reason; else null. */
  disabledReason: string | null;
  /**
   * The endpoint's `origin_epoch` as the record found it (null: no endpoint row): another than
   * the attempt's means the endpoint moved to another origin meanwhile, and the answer is not its.
   */
  originEpoch: number | null;
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
   * the one to wake when the delivery at `sequence` (`deliveryId`) ends (docs/design.md §6.5). It is
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
   * with its last attempt. Successes of concurrent jobs share one statement, waiting up to
   * 4 ms for company when they would go alone (not those holding a FIFO line); one that finds
   * its endpoint's episode open closes it after (`endpoint.recovered`), once per process.
   * @throws DeliveryGoneError when the delivery no longer exists (nothing is written)
   */
  recordAttempt(record: AttemptRecord): Promise<RecordResult>;
  /**
   * The endpoint's circuit opened: `endpoint.failing`, the first time in its open episode
   * (shared/deliveries/episodes.ts `announceFailing`), unless the endpoint moved to another
   * origin since the attempt that opened it started (`originEpoch`).
   * @returns the deliveries of the event (queue them); none when it was announced already
   */
  circuitOpened(endpointId: number, originEpoch: number | null): Promise<string[]>;
  /** Fails a delivery without an HTTP attempt (disabled or deleted endpoint, unusable secret). */
  failWithoutAttempt(deliveryId: string, reason: string): Promise<void>;
}

function toClaimedDelivery(row: ClaimRow): ClaimedDelivery {
  return {
    id: row.id,
    createdAt: row.created_at,
    endpointId: row.endpoint_id,
    url: row.endpoint_id !== null && row.endpoint_url !== null ? row.endpoint_url : row.url,
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
    originEpoch: row.endpoint_origin_epoch,
    auth: row.endpoint_auth,
    clientCertificate: row.endpoint_client_cert !== null && row.endpoint_client_key !== null ? { cert: row.endpoint_client_cert, key: row.endpoint_client_key } : null,
    type: 'http',
  };
}

/**
 * Whether a database error postpones the attempt without counting it (docs/design.md §6.7):
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
    // A legacy id that reads as a UUIDv7 is looked for again in the legacy partition (docs/design.md §3.5).
    const rows = await findByIds(batch.map((claim) => claim.deliveryId), (ids, keys) =>
      rawQuery<ClaimRow>(sequelize, claimStatement(batch.filter((claim) => ids.includes(claim.deliveryId)), keys)),
    );
    const claimed = new Map((await withBodies(rows)).map((row) => [row.id, toClaimedDelivery(row)]));
    return batch.map((claim) => claimed.get(claim.deliveryId) ?? null);
  });

  /** Per success recorded, its endpoint's open episode (null: none) and its origin epoch now. */
  const successes = createGroupCommit<AttemptRecord, { openEpisode: string | null; originEpoch: number | null }>(async (batch) => {
    const done = await rawQuery<{ id: string; episode_id: string | null; origin_epoch: number | null }>(sequelize, {
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
        batch.map((record) => record.url),
        batch.map((record) => record.originEpoch),
      ],
    });
    const found = new Map(done.map((row) => [row.id, row]));
    return batch.map((record) => {
      const row = found.get(record.deliveryId);
      return row
        ? { ok: true as const, value: { openEpisode: row.episode_id, originEpoch: row.origin_epoch } }
        : { ok: false as const, error: new DeliveryGoneError(record.deliveryId) };
    });
  }, { retryAlone: (error) => !postponesAttempt(error), lingerMs: SUCCESS_LINGER_MS });

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
      return { row, result: { noticeIds: [], disabledReason: null, originEpoch: row.origin_epoch } };
    }
    return sequelize.transaction(async (transaction) => {
      const [row] = await sequelize.query<RecordRow>(RECORD.text, { bind: values, type: QueryTypes.SELECT, transaction });
      if (!row?.found) throw new DeliveryGoneError(record.deliveryId);
      // Only the transaction that wrote the last attempt announces it, once.
      const exhausted = record.exhausted && row.attempted ? await announceExhausted(sequelize, transaction, record.deliveryId) : [];
      const disabled = gone
        ? await disableEndpoint(sequelize, { endpointId, goneReason, disableAfterS, originEpoch: record.originEpoch }, transaction)
        : { noticeIds: [], disabledReason: null };
      const noticeIds = [...disabled.noticeIds, ...exhausted.map((job) => job.deliveryId)];
      return { row, result: { noticeIds, disabledReason: disabled.disabledReason, originEpoch: row.origin_epoch } };
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
        const { openEpisode, originEpoch } = await successes.submit(record, { atOnce: record.inLine === true });
        if (openEpisode === null || record.endpointId === null) return { noticeIds: [], disabledReason: null, originEpoch };
        return { noticeIds: await endEpisode(record.endpointId, openEpisode, record.statusCode), disabledReason: null, originEpoch };
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
        record.url,
        record.originEpoch,
      ];
      const { endpointId } = record;
      const { row, result } = await writeRecord(record, values);
      if (row.open_episode !== null && endpointId !== null) {
        return { ...result, noticeIds: [...result.noticeIds, ...(await endEpisode(endpointId, row.open_episode, record.statusCode))] };
      }
      if (!row.disable_due || endpointId === null || record.goneReason !== null) return result;
      // Rare, so a transaction of its own after the record: should the process die between
      // the two, the endpoint's next failed attempt finds the disable due again.
      const disabled = await disableEndpoint(sequelize, { endpointId, goneReason: null, disableAfterS, originEpoch: record.originEpoch });
      return { noticeIds: [...result.noticeIds, ...disabled.noticeIds], disabledReason: disabled.disabledReason, originEpoch: result.originEpoch };
    },

    async circuitOpened(endpointId, originEpoch) {
      return (await announceFailing(sequelize, endpointId, originEpoch)).map((job) => job.deliveryId);
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

/**
 * How long a success waits for others to share its statement when none is running, ms. At a
 * steady low rate each success otherwise went alone (a round trip, a transaction and a WAL
 * flush each); the wait comes after the receiver has the webhook, so it delays no receipt,
 * only the job's end (its slot and its endpoint's lease, a few ms longer).
 */
const SUCCESS_LINGER_MS = 4;

/** How far before a FIFO delivery's own day {@link DeliveryStore.nextInLine} looks, and after now, ms. */
const NEXT_IN_LINE_SLACK_MS = 86_400_000;

/** PostgreSQL text cannot hold NUL; a binary answer keeps the rest of its excerpt. */
function storableText(text: string | null): string | null {
  return text?.replace(/\u0000/g, '') ?? null;
}
