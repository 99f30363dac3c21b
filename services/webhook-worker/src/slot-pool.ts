/**
 * The WORKER_CONCURRENCY slots of one worker process, shared by its queue partitions (DESIGN
 * §13: one limit across all of them). A job runs only while it holds a slot, so the process
 * never has more than `size` jobs in hand, however many partitions it drains; an idle
 * partition holds none (it waits for work without one), and partitions with work share the
 * slots evenly: one that holds at least its fair share (size / partitions wanting slots) gives
 * a slot back, instead of passing it to its own next job, while another partition wants one.
 */
export interface SlotPool {
  readonly size: number;
  /** Slots held now by all members. */
  readonly held: number;
  /** Removes a partition: its waits end (false), its slots stay counted until given back. */
  leave(member: object): void;
  /** Resolves at the next slot given back or partition leaving: a refused partition tries again then. */
  changed(): Promise<void>;
  /** Slots `member` holds. */
  heldBy(member: object): number;
  /**
   * Takes a slot now if one is free and fairness allows it: no other partition waits, and
   * `member` is under its fair share while other partitions want slots. A refusal marks
   * `member` as wanting one, which lowers the others' fair share.
   */
  tryTake(member: object): boolean;
  /**
   * Waits for a slot, for a member that holds none: slots given back go to waiters first,
   * oldest first. Resolves true with the slot taken, or false when the member left.
   */
  take(member: object): Promise<boolean>;
  /** Gives a slot back: to the oldest waiter, else it is free; either way {@link changed} resolves. */
  give(member: object): void;
  /**
   * Whether a member's finished job may pass its slot to the member's next job (BullMQ fetches
   * it in the same script): only while no one waits and the member is within its fair share.
   */
  mayKeep(member: object): boolean;
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
  let resolveChange: () => void = () => undefined;
  let change = new Promise<void>((resolve) => (resolveChange = resolve));
  const signalChange = () => {
    resolveChange();
    change = new Promise<void>((resolve) => (resolveChange = resolve));
  };

  const heldBy = (member: object) => holders.get(member) ?? 0;
  const grant = (member: object) => {
    holders.set(member, heldBy(member) + 1);
    held += 1;
    wanting.delete(member);
  };
  /** Slots per partition that holds or wants some, at least one. */
  const fairShare = () => {
    const active = new Set<object>(wanting);
    for (const [member, count] of holders) if (count > 0) active.add(member);
    for (const waiter of waiters) active.add(waiter.member);
    return Math.max(1, Math.floor(size / Math.max(1, active.size)));
  };
  const othersWant = (member: object) => waiters.length > 0 || [...wanting].some((other) => other !== member);

  return {
    size,
    get held() {
      return held;
    },
    leave(member) {
      wanting.delete(member);
      for (let i = waiters.length - 1; i >= 0; i -= 1) {
        if (waiters[i].member === member) waiters.splice(i, 1)[0].resolve(false);
      }
      signalChange();
    },
    changed: () => change,
    heldBy,
    tryTake(member) {
      const fair = !othersWant(member) || (waiters.length === 0 && heldBy(member) < fairShare());
      if (held < size && fair) {
        grant(member);
        return true;
      }
      wanting.add(member);
      return false;
    },
    take(member) {
      if (this.tryTake(member)) return Promise.resolve(true);
      wanting.delete(member);
      return new Promise<boolean>((resolve) => waiters.push({ member, resolve }));
    },
    give(member) {
      holders.set(member, Math.max(0, heldBy(member) - 1));
      held -= 1;
      const waiter = waiters.shift();
      if (waiter) {
        grant(waiter.member);
        waiter.resolve(true);
      }
      signalChange();
    },
    mayKeep(member) {
      return waiters.length === 0 && (!othersWant(member) || heldBy(member) <= fairShare());
    },
    satisfied(member) {
      wanting.delete(member);
    },
  };
}
