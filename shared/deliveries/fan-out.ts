import { QueryTypes, Sequelize, Transaction } from 'sequelize';
import { activeTraceparent, annotateActiveSpan, WEBHOOK_EVENT, WEBHOOK_IDS } from '../tracing';
import { eventEnvelope } from './event-data';
import { eventRowsClauses, type EventKind, type FannedOutEvent, jobsOfEvent } from './event-rows';
import type { JobToAdd } from '../queue/webhook-queue';

/** One event to fan out to the endpoints subscribed to it (docs/design.md §6.2, §11.1 `POST /events`). */
export interface EventFanOut {
  /** What made the event: a post change, a `POST /events` fan-out, or the system. */
  kind: Extract<EventKind, 'post' | 'fan-out' | 'operational'>;
  event: string;
  /**
   * The `_data` of the envelope: any non-empty JSON value, a string sent as a string (a
   * published payload goes through shared/deliveries `eventDataOf` first).
   */
  data: unknown;
  /**
   * The user whose own endpoints also receive it (a post's owner, `POST /events`'s
   * `user_id`); null: operator endpoints only.
   */
  ownerUserId: number | null;
  /** The endpoint an operational event is about, which never receives it. */
  aboutEndpointId?: number;
}

/**
 * Writes the event's `webhook_events` row (docs/design.md §3.2: its body stored once, also when nobody
 * subscribes, so a replay can find it) and one `webhook_deliveries` row referencing it per
 * endpoint that receives the event (subscription.ts), inside `transaction`: the
 * event-rows.ts {@link eventRowsClauses} of a batch of one. The body is the docs/design.md §7 envelope,
 * serialised once. The writing request's trace travels in the rows, so a revived job still joins it.
 *
 * @returns each delivery as the job to add, with its endpoint's gate key, in endpoint id order;
 *   none when nobody subscribes
 * @throws EncryptionError (shared/webhook) when `data` is empty or not serialisable
 */
export async function insertEventDeliveryJobs(sequelize: Sequelize, transaction: Transaction, fanOut: EventFanOut): Promise<JobToAdd[]> {
  const body = eventEnvelope(fanOut.event, fanOut.data);
  const rows = await sequelize.query<FannedOutEvent>(SINGLE_EVENT, {
    bind: [fanOut.event, body, fanOut.ownerUserId, activeTraceparent(), fanOut.kind, fanOut.aboutEndpointId ?? null],
    type: QueryTypes.SELECT,
    transaction,
  });
  const jobs = rows.length === 0 ? [] : jobsOfEvent(rows[0]);
  annotateActiveSpan({ [WEBHOOK_EVENT]: fanOut.event, [WEBHOOK_IDS]: jobs.map((job) => job.deliveryId) });
  return jobs;
}

// One event of $1 name, $2 body (its exact bytes), $3 owner, $4 traceparent, $5 kind, $6 the endpoint it is about.
const SINGLE_EVENT = `WITH source AS (
       SELECT 1::bigint AS ord, $5::text AS kind, $1::text AS event, $3::int AS owner_id, $6::int AS about_id, $4::text AS traceparent, $2::text AS body
     ), ${eventRowsClauses()}
     SELECT delivery_ids, endpoint_ids FROM fan_by_event`;
