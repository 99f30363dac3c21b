import type { Logger } from 'pino';
import type { LinePlace } from '../../../shared/endpoint-gate';
import type { JobScope } from './job-scope';
import type { WorkerJob } from '../../../shared/queue';
import type { Outcome } from './decisions';
import type { ClaimedDelivery, DeliveryStore } from './delivery-store';

/**
 * A FIFO delivery waiting for the one ahead of it is parked this long: the one ahead wakes it
 * when it ends, so this only bounds the wait when that wake-up is lost (its worker killed
 * between recording and waking).
 */
export const FIFO_PARK_MS = 30_000;

export interface FifoLineOptions {
  store: DeliveryStore;
  /** Makes these parked jobs runnable now; `partition` is where to look first. */
  wake(deliveryIds: string[], shard: number): Promise<void>;
}

/** A FIFO endpoint's line as the worker keeps it (see {@link createFifoLine}). */
export interface FifoLine {
  /**
   * The job's delivery could not be claimed: it parks until the delivery ahead in its line
   * ends, is postponed until its next attempt is due, or is done (a duplicate of a finished one).
   * `passed`: the gate key whose gate let the job through before the claim, which for a
   * delivery behind its line's head means the gate took the endpoint for unordered.
   */
  waitTurn(job: WorkerJob, scope: JobScope, passed: string | undefined, log: Logger): Promise<Outcome>;
  /** The delivery after this one in its FIFO line, now that this one ended; null for none (or not FIFO). Never throws. */
  nextAfter(delivery: ClaimedDelivery, log: Logger): Promise<string | null>;
  /** Wakes the line's next delivery. Never throws: a lost wake-up ends with the parking. */
  wake(next: string, scope: JobScope, log: Logger): Promise<void>;
}

/**
 * docs/design.md §6.5: a FIFO endpoint's deliveries are claimed one at a time in sequence
 * order (the claim checks that nothing earlier is unfinished); a job whose delivery must wait
 * its turn is parked, and the worker that ends the delivery ahead wakes it.
 */
export function createFifoLine(options: FifoLineOptions): FifoLine {
  const { store } = options;

  return {
    async waitTurn(job, scope, passed, log) {
      const { deliveryId } = job.data;
      const state = await store.peek(deliveryId);
      if (!state) {
        log.warn('delivery not found; dropping the job');
        return { kind: 'done' };
      }
      if (state.queuedBehind) {
        log.debug('FIFO endpoint: an earlier delivery has not ended; parking the job');
        if (passed) await scope.gate.markLine(passed).catch((error: unknown) => log.warn({ err: error }, 'could not record the FIFO line with the gate'));
        // The delivery ahead may have ended between the claim and the parking, when its
        // worker's wake-up still found this job running: once parked, look once more.
        const recheck = async () => (await store.peek(deliveryId))?.queuedBehind === false;
        return { kind: 'park', until: Date.now() + FIFO_PARK_MS, recheck };
      }
      if ((state.status === 'pending' || state.status === 'delivering') && state.nextAttemptAt) {
        log.debug({ nextAttemptAt: state.nextAttemptAt }, 'attempt not due yet; delaying the job');
        return { kind: 'postpone', at: state.nextAttemptAt.getTime() };
      }
      log.debug({ status: state.status }, 'delivery already finished; duplicate job ignored');
      return { kind: 'done' };
    },

    async nextAfter(delivery, log) {
      if (delivery.sequence === null || delivery.endpointId === null) return null;
      try {
        return await store.nextInLine(delivery.endpointId, delivery.sequence, delivery.id);
      } catch (error) {
        log.warn({ err: error }, 'could not find the next FIFO delivery; it runs when its parking ends');
        return null;
      }
    },

    async wake(next, scope, log) {
      try {
        // Same endpoint, so same partition, unless the count changed since: then wake looks further.
        await options.wake([next], scope.shard);
      } catch (error) {
        log.warn({ err: error }, 'could not wake the next FIFO delivery; it runs when its parking ends');
      }
    },
  };
}

/** Where a claimed delivery stands in its endpoint's FIFO line, for the gate (docs/design.md §6.5). */
export function linePlace(delivery: ClaimedDelivery): LinePlace {
  if (delivery.sequence === null) return 'unordered';
  return delivery.oneShot ? 'aside' : 'head';
}
