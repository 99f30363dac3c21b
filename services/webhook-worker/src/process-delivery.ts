import { DelayedError, Job } from 'bullmq';
import type { Logger } from 'pino';
import type { Config } from '../../../shared/config';
import type { Metrics } from '../../../shared/metrics';
import { DEFERRED_PRIORITY, RETRY_PRIORITY, WebhookJobData, WebhookJobName, partitionOfQueueName } from '../../../shared/queue';
import { deriveSecret, signedHeaders } from '../../../shared/webhook/signing';
import { AttemptVerdict, DeliveryGate, GateDecision, gateKeyOf } from '../../../shared/queue/circuit-breaker';
import { EndpointRateLimiter, RATE_SLOT_TOLERANCE_MS } from '../../../shared/queue/rate-limit';
import { announceCircuitOpened } from './circuit-notices';
import { ClaimedDelivery, DeliveryStore, postponesAttempt } from './delivery-store';
import type { HttpSender, SendResult } from './http-sender';
import type { RetryPolicy } from './retry-policy';

export interface DeliveryProcessorOptions {
  config: Pick<Config, 'appKey' | 'webhookSalt' | 'workerConcurrency'>;
  store: DeliveryStore;
  sender: HttpSender;
  policy: RetryPolicy;
  /**
   * The endpoint gate and rate limiter of a queue partition (their keys live in it): a job
   * always uses those of the partition it sits in (DESIGN §13).
   */
  gates(partition: number): PartitionGates;
  logger: Logger;
  metrics?: Metrics;
  /** Queues deliveries the worker itself recorded (operational events, DESIGN §6 rev 4); must not throw. */
  queueNotices(deliveryIds: string[]): Promise<void>;
  /**
   * Makes the parked jobs of these deliveries runnable now (out of the delayed set, or added
   * again when Redis lost them): a FIFO endpoint's next in line, once the one ahead ended, and
   * the jobs a gate release woke. `partition` is where to look first: the waking job's.
   */
  wake(deliveryIds: string[], partition: number): Promise<void>;
  /** Uniform in [0, 1); tests pin it. */
  random?: () => number;
}

export type DeliveryJob = Job<WebhookJobData, void, WebhookJobName>;

/** A partition's per-endpoint controls. */
export interface PartitionGates {
  gate: DeliveryGate;
  /** Each endpoint's `rate_limit_per_s`, across all workers (DESIGN §14). */
  rateLimiter: EndpointRateLimiter;
}

/** What one job's attempt works with: its partition and that partition's gates. */
interface JobScope extends PartitionGates {
  partition: number;
}

/** Headers a caller's or an endpoint's own headers may not set: the signature set, and what HTTP itself owns. */
const RESERVED_HEADERS = new Set([
  'content-type',
  'content-length',
  'transfer-encoding',
  'host',
  'connection',
  'proxy-authorization',
  'webhook-id',
  'webhook-timestamp',
  'webhook-signature',
]);

/** Share of a worker's slots retries may hold, so first attempts always find free slots. */
const RETRY_SHARE = 0.8;
/** A retry over that share waits this long, jittered: a local limit, freed within an attempt. */
const RETRY_SLOT_WAIT_MS: [number, number] = [100, 500];
/**
 * A job refused for its endpoint's cap, or while the endpoint's probe is in flight, is parked
 * with the gate this long: the attempt that returns a lease wakes it (DESIGN §6), so this
 * only bounds the wait when that wake-up is lost (its worker killed between release and wake).
 */
export const GATE_PARK_MS = 30_000;
/** A job woken this much before its rate-limit slot (clock granularity of the delayed set) still holds it, ms. */
const RATE_SLOT_EARLY_MS = 20;
/**
 * PostgreSQL unreachable: postpone by as long as it has been away so far, at least 0.5 s and
 * at most 15 s, so a short outage costs little and a long one does not spin.
 */
const DATABASE_BACKOFF_MS = { min: 500, max: 15_000 };
/**
 * A FIFO delivery waiting for the one ahead of it is parked this long: the one ahead wakes it
 * when it ends, so this only bounds the wait when that wake-up is lost (its worker killed
 * between recording and waking).
 */
export const FIFO_PARK_MS = 30_000;

/**
 * The BullMQ processor: one attempt per run, isolated per endpoint (DESIGN §6). Before an
 * attempt it takes a lease from the endpoint's (ad-hoc: origin's) gate, one Redis script for
 * both the concurrency cap and the circuit breaker; a job the gate refuses goes back to the
 * delayed set without an attempt (BullMQ "Manually move a job to delayed"). The first
 * refusal also writes the gate key into the job's data, so later runs ask the gate before
 * touching PostgreSQL. Then it claims the delivery (one query), signs the stored body with a
 * fresh timestamp and the stable webhook-id, sends it, records the attempt with the
 * delivery's new state (one query), and returns the lease with the attempt's verdict (one
 * script). A retry moves this same job to the delayed set until the next attempt is due, so
 * the retry count lives in PostgreSQL and survives Redis losing its data. Deferred jobs and
 * retries are prioritized, so fresh first attempts run ahead of them, and retries hold at
 * most 80% of the slots.
 * While PostgreSQL is unreachable the job waits (backing off) without using an attempt.
 * A FIFO endpoint's deliveries are claimed one at a time in sequence order (the claim checks
 * that nothing earlier is unfinished); a job whose delivery must wait its turn is parked, and
 * the worker that ends the delivery ahead wakes it (DESIGN §6, Ordering).
 *
 * @throws DelayedError after postponing the job (BullMQ's signal, not a failure); other
 *   database errors, which fail the job and let BullMQ retry it
 */
export function createDeliveryProcessor(options: DeliveryProcessorOptions) {
  const { store, sender, policy, logger, metrics, config } = options;
  const random = options.random ?? Math.random;
  const retrySlots = Math.max(1, Math.floor(config.workerConcurrency * RETRY_SHARE));
  let retriesInFlight = 0;
  let databaseDownSince: number | undefined;

  const between = ([low, high]: [number, number]) => low + (high - low) * random();

  async function postpone(job: DeliveryJob, token: string | undefined, at: number): Promise<never> {
    await job.moveToDelayed(Math.round(at), token);
    throw new DelayedError();
  }

  /**
   * A refused job waits without an attempt: until the circuit's reopening when it is open
   * (spread over a second, so one job is the probe and the rest follow it), else parked with
   * the gate, which the next release wakes. Parked in two steps (the gate's set, then the
   * delayed set), so a release in between finds the job still running: it is no longer in the
   * gate's set once in the delayed set, and wakes itself.
   */
  async function refused(
    job: DeliveryJob,
    token: string | undefined,
    scope: JobScope,
    gateKey: string,
    decision: Extract<GateDecision, { granted: false }>,
  ): Promise<never> {
    if (decision.reason === 'rate') return waitForRateSlot(job, token, gateKey, decision.waitMs, decision.limitPerS, logger);
    if (decision.reason === 'open') return postpone(job, token, Date.now() + decision.waitMs + between([0, 1_000]));
    await job.moveToDelayed(Date.now() + GATE_PARK_MS, token);
    const jobId = job.id ?? job.data.deliveryId;
    try {
      if (!(await scope.gate.isParked(gateKey, jobId))) await options.wake([jobId], scope.partition);
    } catch (error) {
      logger.warn({ err: error, gate: gateKey }, 'could not check a parked job; it runs when its parking ends');
    }
    throw new DelayedError();
  }

  async function unclaimed(job: DeliveryJob, token: string | undefined, scope: JobScope, log: Logger): Promise<void> {
    const state = await store.peek(job.data.deliveryId);
    if (!state) {
      log.warn('delivery not found; dropping the job');
      return;
    }
    if (state.queuedBehind) {
      log.debug('FIFO endpoint: an earlier delivery has not ended; parking the job');
      return park(job, token, scope, log);
    }
    if ((state.status === 'pending' || state.status === 'delivering') && state.nextAttemptAt) {
      log.debug({ nextAttemptAt: state.nextAttemptAt }, 'attempt not due yet; delaying the job');
      return postpone(job, token, state.nextAttemptAt.getTime());
    }
    log.debug({ status: state.status }, 'delivery already finished; duplicate job ignored');
  }

  /**
   * Whether the job woke for the rate-limit slot it reserved (a retry, or a job much later, a
   * wait behind the cap say, reserves again); the gate still checks the last second's attempts.
   */
  function holdsRateSlot(job: DeliveryJob): boolean {
    const { rateSlot: slot, rateLimit: limit } = job.data;
    if (slot === undefined || limit === undefined) return false;
    const late = Date.now() - slot;
    return late >= -RATE_SLOT_EARLY_MS && late <= RATE_SLOT_TOLERANCE_MS;
  }

  /** Waits for the rate-limit slot the job was given, without an attempt. */
  async function waitForRateSlot(job: DeliveryJob, token: string | undefined, gateKey: string, waitMs: number, limitPerS: number, log: Logger): Promise<never> {
    const slot = Date.now() + waitMs;
    await job.updateData({ deliveryId: job.data.deliveryId, gate: gateKey, rateSlot: slot, rateLimit: limitPerS });
    log.debug({ slot: new Date(slot) }, 'endpoint rate limit: waiting for the reserved slot');
    return postpone(job, token, slot);
  }

  /** Parks a FIFO delivery's job until the delivery ahead of it ends (its worker wakes this one). */
  async function park(job: DeliveryJob, token: string | undefined, scope: JobScope, log: Logger): Promise<never> {
    await job.moveToDelayed(Date.now() + FIFO_PARK_MS, token);
    try {
      // The delivery ahead may have ended between the claim and the move, when its worker's
      // wake-up still found this job running: look once more now that the job is parked.
      const state = await store.peek(job.data.deliveryId);
      if (state && !state.queuedBehind) await options.wake([job.data.deliveryId], scope.partition);
    } catch (error) {
      log.warn({ err: error }, 'could not check a parked FIFO delivery again; it runs when its parking ends');
    }
    throw new DelayedError();
  }

  /** A FIFO delivery ended (succeeded or failed for good): its endpoint's next in line may go. */
  async function wakeNextInLine(delivery: ClaimedDelivery, scope: JobScope, log: Logger): Promise<void> {
    if (delivery.sequence === null || delivery.endpointId === null) return;
    try {
      const next = await store.nextInLine(delivery.endpointId, delivery.sequence, delivery.id);
      // Same endpoint, so same partition, unless the count changed since: then wake looks further.
      if (next) await options.wake([next], scope.partition);
    } catch (error) {
      log.warn({ err: error }, 'could not wake the next FIFO delivery; it runs when its parking ends');
    }
  }

  async function attempt(job: DeliveryJob, token: string | undefined, scope: JobScope, log: Logger): Promise<void> {
    const { gate, rateLimiter } = scope;
    const jobId = job.id ?? job.data.deliveryId;
    let leased: string | undefined;
    let verdict: AttemptVerdict = 'neutral';
    /** The rate limit whose slot the gate reserved for this attempt, or null. */
    let rated: number | null = null;
    try {
      if (job.data.gate) {
        const decision = await gate.acquire(job.data.gate, jobId, holdsRateSlot(job));
        if (!decision.granted) return await refused(job, token, scope, job.data.gate, decision);
        leased = job.data.gate;
        rated = decision.rateLimitPerS;
      }
      const delivery = await store.claim(job.data.deliveryId, job.name === 'redeliver');
      databaseDownSince = undefined;
      if (!delivery) return await unclaimed(job, token, scope, log);
      if (delivery.endpointDeleted && delivery.secret === null) {
        await store.failWithoutAttempt(delivery.id, 'endpoint deleted');
        log.warn('endpoint deleted; delivery failed without an attempt');
        return;
      }
      if (delivery.endpointActive === false) {
        await store.failWithoutAttempt(delivery.id, 'endpoint disabled');
        log.warn({ endpointId: delivery.endpointId }, 'endpoint disabled; delivery failed without an attempt');
        return await wakeNextInLine(delivery, scope, log);
      }
      const gateKey = gateKeyOf(delivery);
      if (leased !== gateKey) {
        if (leased) await gate.release(leased, jobId, 'neutral');
        leased = undefined;
        const decision = await gate.acquire(gateKey, jobId, holdsRateSlot(job));
        rated = decision.granted ? decision.rateLimitPerS : null;
        if (!decision.granted) {
          await store.unclaim(delivery.id);
          await job.updateData({ deliveryId: delivery.id, gate: gateKey });
          if (!job.priority) await job.changePriority({ priority: DEFERRED_PRIORITY });
          return await refused(job, token, scope, gateKey, decision);
        }
        leased = gateKey;
      }
      // The gate reserves slots itself once it knows the limit; the row tells it (again) when it
      // does not, or when the endpoint's limit changed or was removed.
      if (delivery.rateLimitPerS === null && rated !== null) await gate.forgetRateLimit(gateKey);
      if (delivery.rateLimitPerS !== null && rated !== delivery.rateLimitPerS && !holdsRateSlot(job)) {
        const waitMs = await rateLimiter.reserve(gateKey, delivery.rateLimitPerS);
        if (waitMs > 0) {
          await store.unclaim(delivery.id);
          return await waitForRateSlot(job, token, gateKey, waitMs, delivery.rateLimitPerS, log);
        }
      }
      if (delivery.rateLimitPerS !== null) await startWithinLimit(rateLimiter, gateKey, jobId, delivery.rateLimitPerS);
      const outcome = await send(delivery, log);
      verdict = outcome.verdict;
      if (outcome.retryAt === null) return await wakeNextInLine(delivery, scope, log);
      // Priority is per job and kept across the delayed set: set once, on the first retry.
      if (job.priority !== RETRY_PRIORITY) await job.changePriority({ priority: RETRY_PRIORITY });
      return await postpone(job, token, outcome.retryAt);
    } catch (error) {
      if (!postponesAttempt(error)) throw error;
      databaseDownSince ??= Date.now();
      const delayMs = Math.min(DATABASE_BACKOFF_MS.max, Math.max(DATABASE_BACKOFF_MS.min, Date.now() - databaseDownSince));
      log.warn({ err: error, delayMs }, 'database unreachable; attempt postponed without counting');
      return await postpone(job, token, Date.now() + delayMs * between([0.8, 1.2]));
    } finally {
      if (leased) await releaseLease(scope, leased, jobId, verdict, log);
    }
  }

  /**
   * Waits, holding the claim, until the endpoint's last second has room for one more attempt,
   * and records it: never more than the limit leave in any one second, across all workers.
   */
  async function startWithinLimit(rateLimiter: EndpointRateLimiter, gateKey: string, jobId: string, limitPerS: number): Promise<void> {
    for (let waitMs = await rateLimiter.start(gateKey, jobId, limitPerS); waitMs > 0; waitMs = await rateLimiter.start(gateKey, jobId, limitPerS)) {
      await new Promise((resolve) => setTimeout(resolve, waitMs));
    }
  }

  async function releaseLease(scope: JobScope, gateKey: string, jobId: string, verdict: AttemptVerdict, log: Logger): Promise<void> {
    try {
      const { change, woken } = await scope.gate.release(gateKey, jobId, verdict);
      if (change !== 'none') log.warn({ gate: gateKey }, change === 'opened' ? 'circuit opened' : 'circuit closed');
      if (change === 'opened') await announceCircuitOpened(store, options.queueNotices, gateKey, log);
      // Parked with this partition's gate, so by jobs of this partition.
      if (woken.length > 0) await options.wake(woken, scope.partition);
    } catch (error) {
      // The lease expires by itself; the circuit misses one verdict.
      log.warn({ err: error, gate: gateKey }, 'could not return the endpoint lease');
    }
  }

  /**
   * Signs, sends and records one attempt.
   * @returns the attempt's verdict for the circuit, and when the next attempt is due (ms since the epoch) or null
   */
  async function send(delivery: ClaimedDelivery, log: Logger): Promise<{ verdict: AttemptVerdict; retryAt: number | null }> {
    let headers: Record<string, string>;
    const body = Buffer.from(delivery.body, 'utf8');
    try {
      headers = buildHeaders(delivery, body, config);
    } catch (error) {
      await store.failWithoutAttempt(delivery.id, `cannot sign: ${(error as Error).message}`);
      log.error({ err: error }, 'cannot sign the delivery; failed without an attempt');
      return { verdict: 'neutral', retryAt: null };
    }

    const attemptNumber = delivery.attempts + 1;
    const result = await sender.send({ url: delivery.url, method: delivery.method, body, headers });
    const verdict = circuitVerdict(result);
    const decision = policy.decide(attemptNumber, result, { oneShot: delivery.oneShot });
    const nextAttemptAt = decision.kind === 'retry' ? new Date(Date.now() + decision.delayMs) : null;
    const gone = decision.kind === 'failed' && decision.disableEndpoint && delivery.endpointId !== null;
    const recorded = await store.recordAttempt({
      deliveryId: delivery.id,
      deliveryCreatedAt: delivery.createdAt,
      attemptNumber,
      statusCode: result.statusCode,
      error: result.error,
      durationMs: result.durationMs,
      response: result.response,
      status: decision.kind === 'retry' ? 'pending' : decision.kind,
      nextAttemptAt,
      endpointId: delivery.endpointId,
      succeeded: decision.kind === 'succeeded',
      goneReason: gone ? `410 Gone from ${delivery.url} at ${new Date().toISOString()}` : null,
      // Every attempt used; a redelivery or recovery (one shot) was the operator's own try.
      exhausted: decision.kind === 'failed' && !decision.disableEndpoint && !delivery.oneShot && attemptNumber >= policy.maxAttempts,
    });
    if (recorded.disabledReason !== null) {
      log.warn({ endpointId: delivery.endpointId, reason: recorded.disabledReason }, 'endpoint disabled');
      metrics?.endpointsDisabled.inc();
    }
    if (recorded.noticeIds.length > 0) await options.queueNotices(recorded.noticeIds);
    metrics?.deliveries.inc({ outcome: gone ? 'disabled' : decision.kind === 'retry' ? 'retried' : decision.kind });
    metrics?.attemptDuration.observe({ status_class: statusClass(result.statusCode) }, result.durationMs / 1000);

    const fields = { attempt: attemptNumber, statusCode: result.statusCode, durationMs: result.durationMs };
    if (decision.kind === 'succeeded') log.info(fields, 'delivered');
    else if (decision.kind === 'failed') log.warn({ ...fields, error: result.error, endpointDisabled: gone }, 'delivery failed; no more attempts');
    else log.info({ ...fields, error: result.error, nextAttemptAt }, 'attempt failed; retry scheduled');
    return { verdict, retryAt: nextAttemptAt?.getTime() ?? null };
  }

  return async function processDelivery(job: DeliveryJob, token?: string): Promise<void> {
    const log = logger.child({ deliveryId: job.data.deliveryId });
    const retry = job.priority === RETRY_PRIORITY;
    if (retry && retriesInFlight >= retrySlots) return postpone(job, token, Date.now() + between(RETRY_SLOT_WAIT_MS));
    if (retry) retriesInFlight += 1;
    const partition = partitionOfQueueName(job.queueName);
    try {
      return await attempt(job, token, { partition, ...options.gates(partition) }, log);
    } finally {
      if (retry) retriesInFlight -= 1;
    }
  };
}

/**
 * How an attempt counts for its endpoint's circuit (DESIGN §6): a timeout, a connection
 * error, 5xx and 429 are failures; 2xx a success; anything else (another answer, or a target
 * the SSRF guard refused) says nothing about the endpoint's health.
 */
export function circuitVerdict(result: SendResult): AttemptVerdict {
  const { statusCode } = result;
  if (statusCode !== null && statusCode >= 200 && statusCode < 300) return 'success';
  if (result.blocked) return 'neutral';
  if (statusCode === null || statusCode >= 500 || statusCode === 429) return 'failure';
  return 'neutral';
}

/**
 * The caller's own headers plus the signature set. While the endpoint's secret rotates, the
 * previous secret adds a second `v1` entry after the current one's (Standard Webhooks lets a
 * receiver accept any listed signature); X-Signature has room for one, so it uses the current
 * secret. A delivery given its own secret is not the endpoint's to rotate.
 */
function buildHeaders(
  delivery: ClaimedDelivery,
  body: Buffer,
  config: Pick<Config, 'appKey' | 'webhookSalt'>,
): Record<string, string> {
  const secret = delivery.secret ?? delivery.endpointSecret ?? deriveSecret(config.appKey, config.webhookSalt, delivery.algo);
  const previous = delivery.secret === null ? delivery.endpointPreviousSecret : null;
  const reserved = delivery.signatureHeader.toLowerCase();
  const own: Record<string, string> = {};
  for (const [name, value] of Object.entries(delivery.headers ?? {})) {
    const lower = name.toLowerCase();
    if (!RESERVED_HEADERS.has(lower) && lower !== reserved) own[name] = String(value);
  }
  return {
    ...own,
    ...signedHeaders({
      id: delivery.id,
      timestamp: Math.floor(Date.now() / 1000),
      body,
      secret,
      additionalSecrets: previous && previous !== secret ? [previous] : [],
      algo: delivery.algo,
      signatureHeader: delivery.signatureHeader,
    }),
  };
}

function statusClass(statusCode: number | null): string {
  return statusCode === null ? 'error' : `${Math.floor(statusCode / 100)}xx`;
}
