import type { Logger } from 'pino';
import { DEFERRED_PRIORITY, type WorkerJob } from '../../../shared/queue';
import { AttemptVerdict, GateDecision, gateKeyOf } from '../../../shared/endpoint-gate';
import { EndpointRateLimiter, RATE_SLOT_TOLERANCE_MS } from '../../../shared/endpoint-gate';
import { announceCircuitOpened } from './circuit-notices';
import type { Decision } from './decisions';
import { jobIdOf } from './decisions';
import type { ClaimedDelivery, DeliveryStore } from './delivery-store';
import { linePlace } from './fifo-line';
import type { JobScope } from './job-scope';
import { between } from './waits';

/**
 * A lease held from a gate key's gate (its lease token is the job's id), the rate limit whose
 * slot the gate reserved with it (null: none), and the origin epoch of the attempt it admits
 * (null: not claimed yet, or no endpoint), which its release reports with the verdict.
 */
export interface Lease {
  gateKey: string;
  leaseToken: string;
  rated: number | null;
  originEpoch: number | null;
}

/** What admission decided, and the lease the attempt holds from now on (none: nothing to release). */
export interface Admitted {
  decision: Decision;
  lease?: Lease;
}

/** Admitted to send: with the lease of the claimed delivery's gate key. */
export interface AdmittedToSend extends Admitted {
  decision: { kind: 'send' };
  lease: Lease;
}

/** Whether admission after the claim let the attempt go on. */
export function admittedToSend(admitted: Admitted): admitted is AdmittedToSend {
  return admitted.decision.kind === 'send' && admitted.lease !== undefined;
}

/**
 * A job refused for its endpoint's cap is parked with the gate this long: the attempt that
 * returns a lease wakes it (docs/design.md §6.4), so this only bounds the wait when that wake-up is
 * lost (its worker killed between release and wake).
 */
export const GATE_PARK_MS = 30_000;
/** A job woken this much before its rate-limit slot (clock granularity of the delayed set) still holds it, ms. */
const RATE_SLOT_EARLY_MS = 20;

export interface AdmissionOptions {
  store: DeliveryStore;
  logger: Logger;
  /** Makes these parked jobs runnable now; `partition` is where to look first. */
  wake(deliveryIds: string[], shard: number): Promise<void>;
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
   * @returns `send` with the lease, or with none: the job claims first (no gate key yet, or the
   *   gate answered `line`: only a FIFO line's head goes on); else the park or postponement of a refused job
   */
  beforeClaim(job: WorkerJob, scope: JobScope): Promise<Admitted>;
  /**
   * After the claim: the claimed delivery's gate key's lease (`held` kept when it is that key's,
   * else returned and asked again, with the delivery's place in its line), then the endpoint's
   * rate limit: its slot, and the start within the last second's room.
   * @returns `send` with the lease; else the park or postponement (the job's new data and
   *   priority with it), with the lease still held, if any
   */
  afterClaim(job: WorkerJob, scope: JobScope, delivery: ClaimedDelivery, held: Lease | undefined): Promise<Admitted>;
  /**
   * Waits, within the endpoint's rate limit, until one more request of this attempt may leave
   * (a 401 sent again with a fresh token, docs/design.md §14.4), and records it as a start of its own.
   */
  startAgain(scope: JobScope, delivery: ClaimedDelivery, lease: Lease): Promise<void>;
  /**
   * Returns the lease with the attempt's verdict and, once a FIFO delivery ended, the next in
   * its line (recorded as the head), then wakes the jobs parked with the gate it freed. Never
   * throws: a lease not returned expires by itself.
   */
  release(scope: JobScope, lease: Lease, verdict: AttemptVerdict, next: string | null, log: Logger): Promise<void>;
}

/**
 * Admission to an attempt, isolated per endpoint (docs/design.md §6.4): a lease from the endpoint's
 * (ad-hoc: origin's) gate, one Redis script for the concurrency cap, the circuit breaker and
 * the rate limit's slot (docs/design.md §14.1). A refused job goes back to the delayed set without an
 * attempt (admission decides, the applier moves the job, decisions.ts): until the circuit
 * reopens, parked with the gate (the release that frees a lease wakes it), or until its
 * reserved rate slot. The first refusal after a claim writes the gate
 * key into the job's data, so later runs ask before touching PostgreSQL.
 */
export function createAdmission(options: AdmissionOptions): Admission {
  const { logger, random } = options;

  /**
   * A refused job waits without an attempt: until the circuit's reopening when it is open
   * (spread over a second, so one job is the probe and the rest follow it), else parked with
   * the gate, which the next release wakes. Behind a probe in flight, parked until the circuit
   * would reopen after a failed probe (the probe's lease end plus the opening that would follow):
   * a successful probe wakes it sooner, a failed one leaves nothing to wake for until then, so a
   * waiting job runs once per opening rather than also at {@link GATE_PARK_MS}. A release
   * between the refusal and the parking finds the job still running: it is no longer in the
   * gate's set once parked, and wakes itself.
   *
   * @param data - the job's new data, when the refusal is the first to know its gate key
   */
  function refused(job: WorkerJob, scope: JobScope, gateKey: string, decision: Extract<GateDecision, { granted: false }>, changes: { data?: WorkerJob['data']; priority?: number } = {}): Decision {
    if (decision.reason === 'rate') return waitForRateSlot(job, gateKey, decision.waitMs, decision.limitPerS, changes.priority);
    if (decision.reason === 'open') return { kind: 'postpone', at: Date.now() + decision.waitMs + between(random, [0, 1_000]), ...changes };
    const parkMs = decision.reason === 'probing' ? decision.waitMs + decision.failedProbeOpeningMs : GATE_PARK_MS;
    const jobId = jobIdOf(job);
    return { kind: 'park', until: Date.now() + parkMs, recheck: async () => !(await scope.gate.isParked(gateKey, jobId)), ...changes };
  }

  /**
   * Whether the job woke for the rate-limit slot it reserved (a retry, or a job much later, a
   * wait behind the cap say, reserves again); the gate still checks the last second's attempts.
   */
  function holdsRateSlot(job: WorkerJob): boolean {
    const { rateSlot: slot, rateLimit: limit } = job.data;
    if (slot === undefined || limit === undefined) return false;
    const late = Date.now() - slot;
    return late >= -RATE_SLOT_EARLY_MS && late <= RATE_SLOT_TOLERANCE_MS;
  }

  /** Waits for the rate-limit slot the job was given, without an attempt. */
  function waitForRateSlot(job: WorkerJob, gateKey: string, waitMs: number, limitPerS: number, priority?: number): Decision {
    const slot = Date.now() + waitMs;
    logger.debug({ deliveryId: job.data.deliveryId, slot: new Date(slot) }, 'endpoint rate limit: waiting for the reserved slot');
    return { kind: 'postpone', at: slot, data: { deliveryId: job.data.deliveryId, gate: gateKey, rateSlot: slot, rateLimit: limitPerS }, ...(priority === undefined ? {} : { priority }) };
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
    async beforeClaim(job, scope) {
      const gateKey = job.data.gate;
      if (!gateKey) return { decision: { kind: 'send' } };
      const leaseToken = jobIdOf(job);
      const decision = await scope.gate.ask(gateKey, leaseToken, holdsRateSlot(job));
      if (decision.granted) return { decision: { kind: 'send' }, lease: { gateKey, leaseToken, rated: decision.rateLimitPerS, originEpoch: null } };
      if (decision.reason === 'line') return { decision: { kind: 'send' } };
      return { decision: refused(job, scope, gateKey, decision) };
    },

    async afterClaim(job, scope, delivery, held) {
      const { gate, rateLimiter } = scope;
      const leaseToken = jobIdOf(job);
      const gateKey = gateKeyOf(delivery);
      let lease = held;
      if (lease?.gateKey !== gateKey) {
        if (lease) await gate.release(lease.gateKey, leaseToken, 'neutral');
        lease = undefined;
        const decision = await gate.acquire(gateKey, leaseToken, { holdsRateSlot: holdsRateSlot(job), place: linePlace(delivery), originEpoch: delivery.originEpoch });
        if (!decision.granted) {
          // Later runs ask before touching PostgreSQL, and wait behind fresh first attempts.
          const changes = { data: { deliveryId: delivery.id, gate: gateKey }, ...(job.priority ? {} : { priority: DEFERRED_PRIORITY }) };
          return { decision: refused(job, scope, gateKey, decision, changes) };
        }
        lease = { gateKey, leaseToken, rated: decision.rateLimitPerS, originEpoch: delivery.originEpoch };
      }
      // A lease taken before the claim reports the epoch the attempt starts with.
      lease = { ...lease, originEpoch: delivery.originEpoch };
      // The gate reserves slots itself once it knows the limit; the row tells it (again) when it
      // does not, or when the endpoint's limit changed or was removed.
      if (delivery.rateLimitPerS === null && lease.rated !== null) await gate.forgetRateLimit(gateKey);
      if (delivery.rateLimitPerS !== null && lease.rated !== delivery.rateLimitPerS && !holdsRateSlot(job)) {
        const waitMs = await rateLimiter.reserve(gateKey, delivery.rateLimitPerS);
        if (waitMs > 0) return { decision: waitForRateSlot(job, gateKey, waitMs, delivery.rateLimitPerS), lease };
      }
      if (delivery.rateLimitPerS !== null) await startWithinLimit(rateLimiter, gateKey, leaseToken, delivery.rateLimitPerS);
      return { decision: { kind: 'send' }, lease };
    },

    async startAgain(scope, delivery, lease) {
      // A start of its own: the first one's entry in the window keeps counting.
      if (delivery.rateLimitPerS !== null) await startWithinLimit(scope.rateLimiter, lease.gateKey, `${lease.leaseToken}:again`, delivery.rateLimitPerS);
    },

    async release(scope, lease, verdict, next, log) {
      try {
        const { change, woken } = await scope.gate.release(lease.gateKey, lease.leaseToken, verdict, next ?? undefined, lease.originEpoch);
        if (change !== 'none') log.warn({ gate: lease.gateKey }, change === 'opened' ? 'circuit opened' : 'circuit closed');
        if (change === 'opened') await announceCircuitOpened(options.store, options.queueNotices, lease.gateKey, lease.originEpoch, log);
        // Parked with this partition's gate, so by jobs of this partition.
        if (woken.length > 0) await options.wake(woken, scope.shard);
      } catch (error) {
        // The lease expires by itself; the circuit misses one verdict.
        log.warn({ err: error, gate: lease.gateKey }, 'could not return the endpoint lease');
      }
    },
  };
}
