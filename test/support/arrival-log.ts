/**
 * What a test peer received, oldest first, with a wait for the first `count` entries: the
 * part the in-process recording server, the forward proxy and the arrival recorder share.
 */
export class ArrivalLog<T> {
  /** Every entry so far, oldest first. */
  readonly entries: T[] = [];
  private readonly waiters = new Set<() => void>();

  /** @param what - what an entry is, for the timeout's message, e.g. `requests at the proxy` */
  constructor(private readonly what: string) {}

  /** Records one entry and wakes the waits it completes. */
  push(entry: T): void {
    this.entries.push(entry);
    for (const wake of this.waiters) wake();
  }

  /** Resolves with a copy of the entries once there are at least `count`; rejects after `timeoutMs`. */
  waitFor(count: number, timeoutMs = 5000): Promise<T[]> {
    return new Promise((resolve, reject) => {
      const check = () => {
        if (this.entries.length < count) return;
        this.waiters.delete(check);
        clearTimeout(timer);
        resolve(this.entries.slice());
      };
      const timer = setTimeout(() => {
        this.waiters.delete(check);
        reject(new Error(`expected ${count} ${this.what} within ${timeoutMs} ms, got ${this.entries.length}`));
      }, timeoutMs);
      this.waiters.add(check);
      check();
    });
  }
}
