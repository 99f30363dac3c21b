/**
 * How long to wait during an outage that has lasted `downForMs` so far: as long again, within
 * `bounds` (ms), so a short outage costs little and a long one does not spin.
 */
export function outageWaitMs(downForMs: number, bounds: { min: number; max: number }): number {
  return Math.min(bounds.max, Math.max(bounds.min, downForMs));
}

/** Uniform in [low, high), drawn from `random` (uniform in [0, 1)). */
export function between(random: () => number, [low, high]: readonly [number, number]): number {
  return low + (high - low) * random();
}
