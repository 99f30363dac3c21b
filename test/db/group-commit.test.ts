import { setTimeout as sleep } from 'node:timers/promises';
import { createGroupCommit, Settled } from '../../shared/db/group-commit';

/** A writer that fails any batch holding a "bad" item, as one statement fails for one bad row. */
function writer(calls: string[][]) {
  return async (items: string[]): Promise<Settled<string>[]> => {
    calls.push(items);
    if (items.includes('bad')) throw new Error(`batch ${items.join(',')} failed`);
    return items.map((item) => ({ ok: true, value: item.toUpperCase() }));
  };
}

describe('group commit', () => {
  it('when items arrive while a batch runs, then they go together in the next batch', async () => {
    const calls: string[][] = [];
    const commit = createGroupCommit(writer(calls));

    const values = await Promise.all(['a', 'b', 'c'].map((item) => commit.submit(item)));

    expect(values).toEqual(['A', 'B', 'C']);
    expect(calls).toEqual([['a'], ['b', 'c']]);
  });

  it('when a batch fails and retryAlone allows it, then each item is run alone and only the bad one gets an error', async () => {
    const calls: string[][] = [];
    const commit = createGroupCommit(writer(calls), { retryAlone: () => true });

    const settled = await Promise.allSettled(['a', 'b', 'bad', 'c'].map((item) => commit.submit(item)));

    expect(settled.map((outcome) => (outcome.status === 'fulfilled' ? outcome.value : (outcome.reason as Error).message))).toEqual([
      'A',
      'B',
      'batch bad failed',
      'C',
    ]);
    expect(calls).toEqual([['a'], ['b', 'bad', 'c'], ['b'], ['bad'], ['c']]);
  });

  it('when a batch fails and retryAlone refuses the error, then every item of the batch gets that error', async () => {
    const calls: string[][] = [];
    const commit = createGroupCommit(writer(calls), { retryAlone: () => false });

    const settled = await Promise.allSettled(['a', 'b', 'bad'].map((item) => commit.submit(item)));

    expect(settled.map((outcome) => outcome.status)).toEqual(['fulfilled', 'rejected', 'rejected']);
    expect(calls).toEqual([['a'], ['b', 'bad']]);
  });

  it('when lingerMs is set, then an item arriving while none runs waits that long for others, and one submitted atOnce takes those gathered along at once', async () => {
    const calls: string[][] = [];
    const commit = createGroupCommit(writer(calls), { lingerMs: 30 });

    const first = commit.submit('a');
    await sleep(10);
    const second = commit.submit('b');
    expect(calls).toEqual([]);
    expect(await Promise.all([first, second])).toEqual(['A', 'B']);
    expect(calls).toEqual([['a', 'b']]);

    const gathered = commit.submit('c');
    const urgent = commit.submit('d', { atOnce: true });
    expect(calls).toEqual([['a', 'b'], ['c', 'd']]);
    expect(await Promise.all([gathered, urgent])).toEqual(['C', 'D']);
  });
});
