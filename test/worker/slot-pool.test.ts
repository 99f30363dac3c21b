import { createSlotPool } from '../../services/webhook-worker/src/slot-pool';

describe('slot pool: one WORKER_CONCURRENCY shared by a worker partitions (DESIGN §13)', () => {
  const a = { name: 'partition a' };
  const b = { name: 'partition b' };

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
