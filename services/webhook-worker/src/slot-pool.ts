/**
 * The WORKER_CONCURRENCY slots of one worker process, shared by its queue partitions (docs/design.md
 * §13.1: one limit across all of them). A job runs only while it holds a slot, so the process
 * never has more than `size` jobs in hand, however many partitions it drains; an idle
 * partition holds none (it waits for work without one). A partition holding none waits in
 * line and gets the next slot given back; one holding more than its fair share while others
 * want slots gives a finished job's slot back instead of passing it to its own next job, and
 * a free slot goes to a partition below its share before one at it. So every partition with
 * work holds at least one slot, and the slots settle in an even split and stay there.
 */
export interface SlotPool {
  readonly size: number;
  /** Slots held now by all members. */
  readonly held: number;
  /** Removes a partition: its waits end (false), its slots stay counted until given back. */
  leave(member: object): void;
  /**
   * Resolves when `member` should try again: one of its own jobs finished (its slot given back
   * or passed on), a slot became free, or it left. A refused partition holding jobs waits here.
   */
  changed(member: object): Promise<void>;
  /** Slots `member` holds. */
  heldBy(member: object): number;
  /**
   * Takes a slot now if one is free, no partition waits for one (waiters come first), and
   * `member` holds less than its fair share or no other partition below its share wants one. A
   * refusal marks `member` as wanting more, which lowers the others' fair share.
   */
  tryTake(member: object): boolean;
  /**
   * Waits for a slot, for a member that holds none: slots given back go to waiters first,
   * oldest first. Resolves true with the slot taken, or false when the member left.
   */
  take(member: object): Promise<boolean>;
  /** Gives a slot back: to the oldest waiter (then `member` hears of it), else it is free and every partition waiting hears of it. */
  give(member: object): void;
  /**
   * Whether a member's finished job may pass its slot to the member's next job (BullMQ fetches
   * it in the same script): only while no one waits, and, while another partition wants more
   * slots, the member holds at most its fair share, ceil(size / partitions holding or wanting
   * slots); else the slot is given back.
   */
  mayKeep(member: object): boolean;
  /**
   * A member's finished job passed its slot to the member's next job: the member's own wait
   * ({@link changed}) ends, so its loop runs that job.
   */
  passed(member: object): void;
  /** The member found no job: it no longer wants a slot. */
  satisfied(member: object): void;
}

/**
 * Creates the pool; it keeps no timer and no I/O.
 *
 * @param size - WORKER_CONCURRENCY, at least 1
 */
export function createSlotPool(size: number): SlotPool {
  const holders = new Map<object, number>();
  const wanting = new Set<object>();
  const waiters: { member: object; resolve: (taken: boolean) => void }[] = [];
  let held = 0;
  // One wait per member, so a job finishing wakes its own partition only, and a freed slot
  // wakes every waiting one: waking all at every job would spin every partition's loop.
  const changes = new Map<object, () => void>();
  const signal = (member: object) => {
    changes.get(member)?.();
    changes.delete(member);
  };
  const signalAll = () => {
    for (const resolve of changes.values()) resolve();
    changes.clear();
  };

  const heldBy = (member: object) => holders.get(member) ?? 0;
  // Members holding or wanting slots, kept as they change: mayKeep runs at every finished job.
  let active = 0;
  const isActive = (member: object) => wanting.has(member) || heldBy(member) > 0;
  const change = (member: object, update: () => void) => {
    const was = isActive(member);
    update();
    active += Number(isActive(member)) - Number(was);
  };
  const grant = (member: object) =>
    change(member, () => {
      holders.set(member, heldBy(member) + 1);
      held += 1;
      wanting.delete(member);
    });
  /** Slots per partition that holds or wants some, rounded up. */
  const fairShare = () => Math.ceil(size / Math.max(1, active));
  /**
   * Whether a free slot belongs to another partition: `member` is at its fair share and one
   * below it wants more. Were the first loop to ask to get it, a partition at its share would
   * go over, give the slot back at its next finished job (mayKeep), and the slots would churn
   * between busy partitions, each move a fetch of its own (a quarter of all jobs with 12
   * partitions sharing 50 slots).
   */
  const belongsToAnother = (member: object) => {
    const share = fairShare();
    if (heldBy(member) < share) return false;
    for (const other of wanting) if (other !== member && heldBy(other) < share) return true;
    return false;
  };

  return {
    size,
    get held() {
      return held;
    },
    leave(member) {
      change(member, () => wanting.delete(member));
      for (let i = waiters.length - 1; i >= 0; i -= 1) {
        if (waiters[i].member === member) waiters.splice(i, 1)[0].resolve(false);
      }
      signal(member);
    },
    changed: (member) =>
      new Promise<void>((resolve) => {
        const previous = changes.get(member);
        changes.set(member, () => {
          previous?.();
          resolve();
        });
      }),
    heldBy,
    tryTake(member) {
      // Waiters hold no slot: a free slot is theirs first.
      if (held < size && waiters.length === 0 && !belongsToAnother(member)) {
        grant(member);
        return true;
      }
      change(member, () => wanting.add(member));
      return false;
    },
    take(member) {
      if (this.tryTake(member)) return Promise.resolve(true);
      return new Promise<boolean>((resolve) => waiters.push({ member, resolve }));
    },
    give(member) {
      change(member, () => holders.set(member, Math.max(0, heldBy(member) - 1)));
      held -= 1;
      const waiter = waiters.shift();
      if (waiter) {
        grant(waiter.member);
        waiter.resolve(true);
        signal(member);
      } else signalAll();
    },
    mayKeep(member) {
      // Passing a slot on saves a round trip to Redis: give it back only for a partition that wants it.
      const othersWant = wanting.size > (wanting.has(member) ? 1 : 0);
      return waiters.length === 0 && (!othersWant || heldBy(member) <= fairShare());
    },
    passed(member) {
      signal(member);
    },
    satisfied(member) {
      change(member, () => wanting.delete(member));
    },
  };
}
