/** One item's outcome in a batch: its value, or the error only that item gets. */
export type Settled<R> = { ok: true; value: R } | { ok: false; error: unknown };

/** Submits items to be written together with whatever else is waiting. */
export interface GroupCommit<I, R> {
  /**
   * Resolves with this item's value, or rejects with its error, once its batch has run.
   * `atOnce` skips the {@link GroupCommitOptions.lingerMs} wait (for an item something else
   * waits on), taking the items gathered so far along.
   */
  submit(item: I, options?: { atOnce?: boolean }): Promise<R>;
}

/** Options of {@link createGroupCommit}. */
export interface GroupCommitOptions {
  /** Items per batch at most; default 200. */
  maxBatch?: number;
  /**
   * Whether a batch that failed with `error` is run again item by item, so that the error
   * reaches only the items it belongs to (one bad row, a deadlock between two processes'
   * batches); default never. A batch of one, or an error this refuses (the database away),
   * fails every item of the batch with it.
   */
  retryAlone?(error: unknown): boolean;
  /**
   * How long an item arriving while no batch runs waits for others to join it, ms; default 0
   * (it starts at once). Items arriving while a batch runs never wait longer than that batch.
   */
  lingerMs?: number;
}

/**
 * Group commit: one batch runs at a time; items submitted meanwhile wait and go together
 * in the next batch, which starts as soon as the previous one returns. At low load a batch
 * is one item and starts at once (no fixed wait) unless `lingerMs` asks it to wait for
 * company; under load batches grow with the load.
 *
 * @param run - writes a batch; returns one outcome per item in input order; a rejection fails
 *   every item of the batch with it, unless {@link GroupCommitOptions.retryAlone} splits it
 */
export function createGroupCommit<I, R>(run: (items: I[]) => Promise<Settled<R>[]>, options: GroupCommitOptions = {}): GroupCommit<I, R> {
  const maxBatch = options.maxBatch ?? 200;
  interface Waiting {
    item: I;
    resolve(value: R): void;
    reject(error: unknown): void;
  }
  const lingerMs = options.lingerMs ?? 0;
  let waiting: Waiting[] = [];
  let running = false;
  let lingering: NodeJS.Timeout | undefined;

  function next(): void {
    clearTimeout(lingering);
    lingering = undefined;
    if (running || waiting.length === 0) return;
    running = true;
    const batch = waiting.length <= maxBatch ? waiting : waiting.slice(0, maxBatch);
    waiting = waiting.length <= maxBatch ? [] : waiting.slice(maxBatch);
    runSplitting(batch.map((entry) => entry.item))
      .then(
        (outcomes) =>
          batch.forEach((entry, index) => {
            const outcome = outcomes[index];
            if (outcome.ok) entry.resolve(outcome.value);
            else entry.reject(outcome.error);
          }),
        (error: unknown) => batch.forEach((entry) => entry.reject(error)),
      )
      .finally(() => {
        running = false;
        next();
      });
  }

  async function runSplitting(items: I[]): Promise<Settled<R>[]> {
    try {
      return await run(items);
    } catch (error) {
      if (items.length === 1 || !options.retryAlone?.(error)) throw error;
      return Promise.all(
        items.map((item) =>
          run([item]).then(
            ([outcome]) => outcome,
            (alone: unknown): Settled<R> => ({ ok: false, error: alone }),
          ),
        ),
      );
    }
  }

  return {
    submit(item, submitted) {
      return new Promise<R>((resolve, reject) => {
        waiting.push({ item, resolve, reject });
        // A batch running takes this item along when it ends; a full one goes at once.
        if (running) return;
        if (lingerMs === 0 || submitted?.atOnce || waiting.length >= maxBatch) next();
        else lingering ??= setTimeout(next, lingerMs);
      });
    },
  };
}
