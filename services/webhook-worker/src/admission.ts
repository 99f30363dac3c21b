import { DelayedError } from 'bullmq';
import type { Logger } from 'pino';
import { DEFERRED_PRIORITY } from '../../../shared/queue';
import { AttemptVerdict, GateDecision, gateKeyOf } from '../../../shared/endpoint-gate';
import { EndpointRateLimiter, RATE_SLOT_TOLERANCE_MS } from '../../../shared/endpoint-gate';
import { announceCircuitOpened } from './circuit-notices';
import type { ClaimedDelivery, DeliveryStore } from './delivery-store';
import { linePlace } from './fifo-line';
import { DeliveryJob, between, jobIdOf, postpone } from './job-moves';
import type { JobScope } from './job-scope';

/**
 * A lease held from a gate key's gate, the rate limit whose slot the gate reserved with it
 * (null: none), and the origin epoch of the attempt it admits (null: not claimed yet, or no
 * endpoint), which its release reports with the verdict.
 */
export interface Lease {
  gateKey: string;
  rated: number | null;
  originEpoch: number | null;
}

/**
 * A job refused for its endpoint's cap is parked with the gate this long: the attempt that
 * returns a lease wakes it (docs/design.md §6), so this only bounds the wait when that wake-up is
 * lost (its worker killed between release and wake).
 */
export const GATE_PARK_MS = 30_000;
/** A job woken this much before its rate-limit slot (clock granularity of the delayed set) still holds it, ms. */
const RATE_SLOT_EARLY_MS = 20;

export interface AdmissionOptions {
  store: DeliveryStore;
  logger: Logger;
  /** Makes these parked jobs runnable now; `partition` is where to look first. */
  wake(deliveryIds: string[], partition: number): Promise<void>;
  /** Queues deliveries the worker itself recorded (`endpoint.failing` when a circuit opens); must not throw. */
  queueNotices(deliveryIds: string[]): Promise<void>;
  /** Uniform in [0, 1); tests pin it. */
  random: () => number;
}

/** The endpoint's gate and rate limit, asked around the claim (see {@link createAdmission}). */
export interface Admission {
  /**
   * Before the claim, for a job whose data holds its gate key: asks the gate, so a refused job
   * never touches PostgreSQL.
   * @returns the lease, or none: the job claims first (no gate key yet, or the gate answered
   *   `line`: only a FIFO line's head goes on)
   * @throws DelayedError after parking or postponing a refused job
   */
  beforeClaim(job: DeliveryJob, token: string | undefined, scope: JobScope): Promise<Lease | undefined>;
  /**
   * After the claim: makes `turn.lease` the claimed delivery's gate key's (asking again, with
   * the delivery's place in its line, when the job held none or another), then the endpoint's
   * rate limit: its slot, and the start within the last second's room.
   * @throws DelayedError after unclaiming the delivery and parking or postponing the job
   */
  afterClaim(job: DeliveryJob, token: string | undefined, scope: JobScope, delivery: ClaimedDelivery, turn: { lease?: Lease }, log: Logger): Promise<void>;
  /**
   * Waits, within the endpoint's rate limit, until one more request of this attempt may leave
   * (a 401 sent again with a fresh token, docs/design.md §14), and records it as a start of its own.
   */
  startAgain(scope: JobScope, delivery: ClaimedDelivery, token: string): Promise<void>;
  /**
   * Returns the lease with the attempt's verdict and, once a FIFO delivery ended, the next in
   * its line (recorded as the head), then wakes the jobs parked with the gate it freed. Never
   * throws: a lease not returned expires by itself.
   */
  release(scope: JobScope, lease: Lease, token: string, verdict: AttemptVerdict, next: string | null, log: Logger): Promise<void>;
}

/**
 * Admission to an attempt, isolated per endpoint (docs/design.md §6): a lease from the endpoint's
 * (ad-hoc: origin's) gate, one Redis script for the concurrency cap, the circuit breaker and
 * the rate limit's slot (docs/design.md §14). A refused job goes back to the delayed set without an
 * attempt: until the circuit reopens, parked with the gate (the release that frees a lease
 * wakes it), or until its reserved rate slot. The first refusal after a claim writes the gate
 * key into the job's data, so later runs ask before touching PostgreSQL.
 */
export function createAdmission(options: AdmissionOptions): Admission {
  const { store, logger, random } = options;

  /**
   * A refused job waits without an attempt: until the circuit's reopening when it is open
   * (spread over a second, so one job is the probe and the rest follow it), else parked with
   * the gate, which the next release wakes. Behind a probe in flight, parked until the circuit
   * would reopen after a failed probe (the probe's lease end plus the opening that would follow):
   * a successful probe wakes it sooner, a failed one leaves nothing to wake for until then, so a
   * waiting job runs once per opening rather than also at {@link GATE_PARK_MS}. Parked
   * in two steps (the gate's set, then the delayed set), so a release in between finds the job
   * still running: it is no longer in the gate's set once in the delayed set, and wakes itself.
   */
  async function refused(
    job: DeliveryJob,
    token: string | undefined,
    scope: JobScope,
    gateKey: string,
    decision: Extract<GateDecision, { granted: false }>,
  ): Promise<never> {
    if (decision.reason === 'rate') return waitForRateSlot(job, token, gateKey, decision.waitMs, decision.limitPerS, logger);
    if (decision.reason === 'open') return postpone(job, token, Date.now() + decision.waitMs + between(random, [0, 1_000]));
    const parkMs = decision.reason === 'probing' ? decision.waitMs + decision.failedProbeOpeningMs : GATE_PARK_MS;
    await job.moveToDelayed(Date.now() + parkMs, token);
    const jobId = jobIdOf(job);
    try {
      if (!(await scope.gate.isParked(gateKey, jobId))) await options.wake([jobId], scope.partition);
    } catch (error) {
      logger.warn({ err: error, gate: gateKey }, 'could not check a parked job; it runs when its parking ends');
    }
    throw new DelayedError();
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

  /**
   * Waits, holding the claim, until the endpoint's last second has room for one more attempt,
   * and records it: never more than the limit leave in any one second, across all workers.
   */
  async function startWithinLimit(rateLimiter: EndpointRateLimiter, gateKey: string, jobId: string, limitPerS: number): Promise<void> {
    for (let waitMs = await rateLimiter.start(gateKey, jobId, limitPerS); waitMs > 0; waitMs = await rateLimiter.start(gateKey, jobId, limitPerS)) {
      await new Promise((resolve) => setTimeout(resolve, waitMs));
    }
  }

  return {
    async beforeClaim(job, token, scope) {
      if (!job.data.gate) return undefined;
      const decision = await scope.gate.ask(job.data.gate, jobIdOf(job), holdsRateSlot(job));
      if (decision.granted) return { gateKey: job.data.gate, rated: decision.rateLimitPerS, originEpoch: null };
      if (decision.reason === 'line') return undefined;
      return refused(job, token, scope, job.data.gate, decision);
    },

    async afterClaim(job, token, scope, delivery, turn, log) {
      const { gate, rateLimiter } = scope;
      const jobId = jobIdOf(job);
      const gateKey = gateKeyOf(delivery);
      if (turn.lease?.gateKey !== gateKey) {
        if (turn.lease) await gate.release(turn.lease.gateKey, jobId, 'neutral');
        turn.lease = undefined;
        const decision = await gate.acquire(gateKey, jobId, { holdsRateSlot: holdsRateSlot(job), place: linePlace(delivery), originEpoch: delivery.originEpoch });
        if (!decision.granted) {
          await store.unclaim(delivery.id);
          await job.updateData({ deliveryId: delivery.id, gate: gateKey });
          if (!job.priority) await job.changePriority({ priority: DEFERRED_PRIORITY });
          return refused(job, token, scope, gateKey, decision);
        }
        turn.lease = { gateKey, rated: decision.rateLimitPerS, originEpoch: delivery.originEpoch };
      }
      // A lease taken before the claim reports the epoch the attempt starts with.
      turn.lease.originEpoch = delivery.originEpoch;
      // The gate reserves slots itself once it knows the limit; the row tells it (again) when it
      // does not, or when the endpoint's limit changed or was removed.
      const { rated } = turn.lease;
      if (delivery.rateLimitPerS === null && rated !== null) await gate.forgetRateLimit(gateKey);
      if (delivery.rateLimitPerS !== null && rated !== delivery.rateLimitPerS && !holdsRateSlot(job)) {
        const waitMs = await rateLimiter.reserve(gateKey, delivery.rateLimitPerS);
        if (waitMs > 0) {
          await store.unclaim(delivery.id);
          return waitForRateSlot(job, token, gateKey, waitMs, delivery.rateLimitPerS, log);
        }
      }
      if (delivery.rateLimitPerS !== null) await startWithinLimit(rateLimiter, gateKey, jobId, delivery.rateLimitPerS);
    },

    async startAgain(scope, delivery, token) {
      // A start of its own: the first one's entry in the window keeps counting.
      if (delivery.rateLimitPerS !== null) await startWithinLimit(scope.rateLimiter, gateKeyOf(delivery), `${token}:again`, delivery.rateLimitPerS);
    },

    async release(scope, lease, token, verdict, next, log) {
      try {
        const { change, woken } = await scope.gate.release(lease.gateKey, token, verdict, next ?? undefined, lease.originEpoch);
        if (change !== 'none') log.warn({ gate: lease.gateKey }, change === 'opened' ? 'circuit opened' : 'circuit closed');
        if (change === 'opened') await announceCircuitOpened(options.store, options.queueNotices, lease.gateKey, lease.originEpoch, log);
        // Parked with this partition's gate, so by jobs of this partition.
        if (woken.length > 0) await options.wake(woken, scope.partition);
      } catch (error) {
        // The lease expires by itself; the circuit misses one verdict.
        log.warn({ err: error, gate: lease.gateKey }, 'could not return the endpoint lease');
      }
    },
  };
}
