/** Options of {@link measureOps}. */
export interface MeasureOptions {
  /** Measured rounds; the median is reported. Default 7. */
  rounds?: number;
  /** How long one batch of each function runs, milliseconds. Default 200. */
  roundMs?: number;
}

/**
 * Operations per second of synchronous functions measured side by side: calibrates a batch
 * size per function so that one batch lasts about `roundMs`, runs two unmeasured warm-up
 * rounds (so the JIT has optimised the code under test), then `rounds` rounds in which every
 * function runs one batch in turn, and returns each function's median. Interleaving the
 * contenders round by round means a burst of load from other processes hits all of them
 * alike, so their ratio stays meaningful on a busy machine.
 *
 * @param fns - the operations; their results are kept in a sink so the JIT cannot drop the calls
 * @returns median operations per second, in the order of `fns`
 */
export function measureOps(fns: ReadonlyArray<() => unknown>, options: MeasureOptions = {}): number[] {
  const rounds = options.rounds ?? 7;
  const roundNs = BigInt(Math.round((options.roundMs ?? 200) * 1e6));
  const batches = fns.map((fn) => calibrate(fn, roundNs));
  for (let warm = 0; warm < 2; warm += 1) fns.forEach((fn, i) => timeBatch(fn, batches[i]));
  const rates: number[][] = fns.map(() => []);
  for (let round = 0; round < rounds; round += 1) {
    fns.forEach((fn, i) => rates[i].push((batches[i] * 1e9) / Number(timeBatch(fn, batches[i]))));
  }
  return rates.map(median);
}

/** A batch size for which `fn` runs about `roundNs`: doubled until a batch takes a tenth of that, then scaled. */
function calibrate(fn: () => unknown, roundNs: bigint): number {
  for (let batch = 1; ; batch *= 2) {
    const elapsed = timeBatch(fn, batch);
    if (elapsed * 10n >= roundNs) return Math.max(1, Math.ceil((batch * Number(roundNs)) / Number(elapsed)));
  }
}

/** The median of a non-empty list (the mean of the two middle values for an even count). */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/**
 * The value below which `p` percent of the samples lie (nearest-rank method).
 *
 * @param sorted - samples in ascending order
 * @param p - percentile, 0..100
 */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
}

// Results go here so the JIT cannot prove a call useless and drop it.
const sink: unknown[] = [undefined];

function timeBatch(fn: () => unknown, count: number): bigint {
  const start = process.hrtime.bigint();
  for (let i = 0; i < count; i += 1) sink[0] = fn();
  const elapsed = process.hrtime.bigint() - start;
  return elapsed > 0n ? elapsed : 1n;
}
