import { createSlotPool } from '../../services/webhook-worker/src/slot-pool';

describe('slot pool: one WORKER_CONCURRENCY shared by a worker partitions (docs/design.md §13.1)', () => {
  const a = { name: 'partition a' };
  const b = { name: 'partition b' };

  /** A pool of 4 held 2 and 2 by a and b, both wanting more, with one of b's slots just given back. */
  function halvedPoolWithAFreeSlot() {
    const pool = createSlotPool(4);
    for (let i = 0; i < 2; i += 1) pool.tryTake(a);
    for (let i = 0; i < 2; i += 1) pool.tryTake(b);
    expect([pool.tryTake(a), pool.tryTake(b)]).toEqual([false, false]);
    pool.give(b);
    return pool;
  }

  it('when one partition alone has work, then it may take every slot and no more', () => {
    const pool = createSlotPool(4);
    for (let i = 0; i < 4; i += 1) expect(pool.tryTake(a)).toBe(true);
    expect(pool.tryTake(a)).toBe(false);
    expect(pool.held).toBe(4);
    expect(pool.mayKeep(a)).toBe(true);
  });

  it('when another partition waits for a slot, then the next slot given back goes to it, not to the busy one', async () => {
    const pool = createSlotPool(4);
    for (let i = 0; i < 4; i += 1) pool.tryTake(a);
    const waiting = pool.take(b);

    expect(pool.mayKeep(a)).toBe(false);
    pool.give(a);

    await expect(waiting).resolves.toBe(true);
    expect([pool.heldBy(a), pool.heldBy(b)]).toEqual([3, 1]);
    expect(pool.held).toBe(4);
  });

  it('when two partitions want slots, then the one over its fair share gives finished jobs slots back until both hold half', () => {
    const pool = createSlotPool(4);
    for (let i = 0; i < 3; i += 1) pool.tryTake(a);
    expect(pool.tryTake(b)).toBe(true);
    expect(pool.tryTake(b)).toBe(false);

    // a holds 3 of 4 with b wanting more: a finished job does not pass its slot on.
    expect(pool.mayKeep(a)).toBe(false);
    pool.give(a);
    expect(pool.tryTake(b)).toBe(true);
    expect([pool.heldBy(a), pool.heldBy(b)]).toEqual([2, 2]);
    expect(pool.mayKeep(a)).toBe(true);
    expect(pool.mayKeep(b)).toBe(true);
  });

  it('when a slot frees while a partition below its fair share wants one, then a partition at its share is refused it, so slots do not churn', () => {
    const pool = halvedPoolWithAFreeSlot();

    // a holds its share (2 of 4): taking the slot, it would go over and give it back at once.
    expect(pool.tryTake(a)).toBe(false);
    expect(pool.tryTake(b)).toBe(true);
    expect([pool.heldBy(a), pool.heldBy(b)]).toEqual([2, 2]);
    expect([pool.mayKeep(a), pool.mayKeep(b)]).toEqual([true, true]);
  });

  it('when the partition below its share found its queue empty, then a partition at its share takes the free slot', () => {
    const pool = halvedPoolWithAFreeSlot();

    pool.satisfied(b);

    expect(pool.tryTake(a)).toBe(true);
    expect([pool.heldBy(a), pool.heldBy(b)]).toEqual([3, 1]);
  });

  it('when a job passes its slot on, then only its own partition hears of it; when a slot frees, every waiting partition does', async () => {
    const pool = createSlotPool(2);
    pool.tryTake(a);
    pool.tryTake(b);
    const heard: string[] = [];
    void pool.changed(a).then(() => heard.push('a'));
    void pool.changed(b).then(() => heard.push('b'));
    pool.passed(a);
    await new Promise((resolve) => setImmediate(resolve));
    expect(heard).toEqual(['a']);

    void pool.changed(a).then(() => heard.push('a again'));
    pool.give(b);
    await new Promise((resolve) => setImmediate(resolve));
    expect(heard.sort()).toEqual(['a', 'a again', 'b']);
  });

  it('when a partition leaves while it waits, then its wait ends without a slot', async () => {
    const pool = createSlotPool(1);
    pool.tryTake(a);
    const waiting = pool.take(b);
    pool.leave(b);
    await expect(waiting).resolves.toBe(false);
    expect(pool.held).toBe(1);
  });
});
