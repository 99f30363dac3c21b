import { median } from './timing';

/** One contender of {@link takeTurns}: `run` makes one measured run and returns what it measured. */
export interface Contender<T> {
  name: string;
  run(round: number): Promise<T>;
}

/**
 * Runs every contender once per round, `rounds` times, the order reversed every other round
 * (A B, then B A), so that load from other processes and any drift of the machine (a warming
 * cache, a growing table) hit every contender alike: a ratio taken round by round stays
 * meaningful on a noisy machine where one run after the other would not.
 *
 * @returns each contender's results, in the order of `contenders`, one per round
 */
export async function takeTurns<T>(rounds: number, contenders: readonly Contender<T>[]): Promise<T[][]> {
  const results: T[][] = contenders.map(() => []);
  for (let round = 0; round < rounds; round += 1) {
    const order = contenders.map((_, i) => i);
    if (round % 2 === 1) order.reverse();
    for (const i of order) results[i].push(await contenders[i].run(round));
  }
  return results;
}

/** Per-round ratios `ours[i] / baseline[i]`, for a figure's `ratios` (report.ts). */
export function roundRatios(ours: readonly number[], baseline: readonly number[]): number[] {
  return ours.map((value, i) => (baseline[i] > 0 ? value / baseline[i] : Number.NaN)).filter(Number.isFinite);
}

export { median };
