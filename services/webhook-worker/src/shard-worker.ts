import { Processor, Worker, WorkerOptions } from 'bullmq';
import type { WebhookJobData, WebhookJobName, WorkerJob } from '../../../shared/queue';
import type { RedisClient } from '../../../shared/redis';
import type { SlotPool } from './slot-pool';

/**
 * A BullMQ worker on one queue partition that takes a job only with a slot of the process's
 * {@link SlotPool}, so all the partitions of a worker process share WORKER_CONCURRENCY (docs/design.md
 * §13.1). BullMQ's own loop is kept (blocking waits, stalled checks, lock renewal): the slot is
 * taken where BullMQ moves a job to active, after any blocking wait for work, so an idle
 * partition waits without holding a slot; a finished job passes its slot to the next job
 * BullMQ fetches in the same script only while the pool allows it (`mayKeep`), else gives it
 * back. Its `concurrency` is the pool's size: the pool, not BullMQ, bounds the jobs in hand.
 *
 * Why not one worker per partition with a fixed share each: a busy partition would be held to
 * its share while others idle. Why not a semaphore inside the processor: BullMQ would have
 * moved the jobs to active already, hoarding them from other workers while they wait.
 */
export class ShardWorker extends Worker<WebhookJobData, void, WebhookJobName> {
  /** Lock tokens of finished jobs whose slot passes to the job BullMQ fetches next under the same lock token. */
  private readonly carried = new Set<string>();
  /** Jobs fetched (with a slot) that BullMQ's loop has not started yet: it fetches several before running any. */
  private fetched = 0;

  /**
   * @param name - the partition's queue name (shared/queue/shards.ts `shardQueueName`)
   * @param options - BullMQ worker options; `concurrency` is set to the pool's size
   */
  constructor(
    name: string,
    processor: Processor<WebhookJobData, void, WebhookJobName>,
    options: WorkerOptions,
    private readonly pool: SlotPool,
  ) {
    super(name, processor, { ...options, concurrency: pool.size });
  }

  /**
   * BullMQ's fetch of one job (moved to active under `lockToken`), run only with a slot: taken
   * here, or passed on by the finished job whose lock token this is.
   * @returns the job, or none (no work, or no slot for now), as BullMQ's own does
   */
  protected override async moveToActive(lockToken: string, name?: string): Promise<WorkerJob> {
    if (this.carried.has(lockToken)) return super.moveToActive(lockToken, name);
    if (!this.pool.tryTake(this)) {
      // BullMQ may have just consumed the queue's marker waiting for work: were it to think the
      // queue drained, its next fetch would wait for a marker that already came (up to its
      // drain delay, 5 s) with jobs waiting. A refused slot says nothing about the queue.
      (this as unknown as { drained: boolean }).drained = false;
      // Jobs fetched and not started: no job at once, so the loop goes and starts them.
      if (this.fetched > 0) return undefined as unknown as WorkerJob;
      if (this.pool.heldBy(this) > 0) {
        // Running jobs only: once one of ours finishes (its next job then waits for this loop)
        // or a slot frees, the loop runs what it has and asks again. Answering at once would
        // spin BullMQ's loop.
        await this.pool.changed(this);
        return undefined as unknown as WorkerJob;
      }
      // Holding none: waiting here holds nothing up.
      if (!(await this.pool.take(this))) return undefined as unknown as WorkerJob;
    }
    let job: WorkerJob | undefined;
    try {
      job = await super.moveToActive(lockToken, name);
    } catch (error) {
      this.pool.give(this);
      throw error;
    }
    if (job) this.fetched += 1;
    else {
      this.pool.give(this);
      this.pool.satisfied(this);
    }
    return job;
  }

  /**
   * BullMQ's run of one job and the fetch of the next in the same script, which keeps the
   * finished job's slot only while the pool allows it; otherwise the slot is given back.
   * @returns the next job BullMQ fetched under `lockToken`, if any
   */
  override async processJob(job: WorkerJob, lockToken: string, fetchNextCallback: () => boolean = () => true): Promise<void | WorkerJob> {
    let next: void | WorkerJob;
    let declined = false;
    let kept = false;
    this.fetched = Math.max(0, this.fetched - 1);
    try {
      next = await super.processJob(job, lockToken, () => {
        const wanted = fetchNextCallback();
        const keep = wanted && this.pool.mayKeep(this);
        kept = keep;
        declined = wanted && !keep;
        if (keep) this.carried.add(lockToken);
        return keep;
      });
    } catch (error) {
      this.carried.delete(lockToken);
      this.pool.give(this);
      throw error;
    }
    this.carried.delete(lockToken);
    // BullMQ reads a finished job that fetched no next one as a drained queue, and its loop
    // would then wait for a marker (up to its drain delay, 5 s) with jobs waiting: the fetch
    // was skipped for the pool, not for want of jobs, so the loop asks again instead.
    if (declined) (this as unknown as { drained: boolean }).drained = false;
    // The slot goes with the next job when BullMQ fetched one under this lock token. Either way the
    // loop may be waiting for a change in moveToActive while this result waits for it.
    if (next) {
      this.fetched += 1;
      this.pool.passed(this);
    } else {
      this.pool.give(this);
      // The fetch ran and found the queue empty: this partition no longer wants slots, so none is kept free for it.
      if (kept) this.pool.satisfied(this);
      // Only a chain the pool ended can leave jobs behind a waiting loop: one that found the
      // queue empty is woken by the producer's marker, and a marker here would cost every
      // delivery on a quiet queue a command and a fetch that finds nothing.
      if (declined) this.wakeBlockedFetch();
    }
    return next;
  }

  /**
   * While BullMQ's loop waits on the queue's marker (it saw the queue empty once), it fetches
   * nothing else: plain BullMQ never needs to, since a finished job always fetches the next one
   * while there are any. Here the pool may end that chain with jobs still waiting, so the loop
   * is woken the way a producer wakes it, with a marker, and asks the pool again; on an empty
   * queue that costs one fetch that finds nothing.
   */
  private wakeBlockedFetch(): void {
    if (!(this as unknown as { waiting: unknown }).waiting || this.closing) return;
    // The command connection this worker was given (BullMQ shares it, never the blocking one).
    (this.opts.connection as RedisClient).zadd(this.keys.marker, 0, '0').catch(() => undefined);
  }

  /** Leaves the pool (ending this partition's waits for a slot), then closes as BullMQ does. */
  override async close(force = false): Promise<void> {
    this.pool.leave(this);
    await super.close(force);
  }
}
