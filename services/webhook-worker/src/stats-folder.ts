import type { Logger } from 'pino';
import type { Sequelize } from 'sequelize';
import { foldStats } from '../../../shared/stats/fold';

/** How often the worker folds the stats deltas, ms: reads add what is not folded yet, so this bounds their extra rows. */
export const STATS_FOLD_INTERVAL_MS = 1_000;

/** The running fold of {@link startStatsFolder}. */
export interface StatsFolder {
  /** Folds now (joining a fold under way); never rejects: a failure is logged. */
  fold(): Promise<void>;
  /** Stops the timer and waits for a fold under way. */
  close(): Promise<void>;
}

/**
 * Folds the appended stats deltas into the minute and hour rows (docs/design.md §14) every
 * `intervalMs` on a timer of the worker's own (unref'd), whatever Redis holds. Every worker
 * folds; two at once take disjoint deltas. A failure (PostgreSQL away) is logged and the
 * deltas wait for the next fold: none is lost or counted twice.
 */
export function startStatsFolder(options: { sequelize: Sequelize; logger: Logger; intervalMs?: number }): StatsFolder {
  const { sequelize, logger } = options;
  let running: Promise<void> | undefined;

  function fold(): Promise<void> {
    running ??= foldStats(sequelize)
      .then(() => undefined)
      .catch((error: unknown) => logger.warn({ err: error }, 'could not fold the stats deltas; the next fold tries again'))
      .finally(() => {
        running = undefined;
      });
    return running;
  }

  const timer = setInterval(() => void fold(), options.intervalMs ?? STATS_FOLD_INTERVAL_MS);
  timer.unref();
  return {
    fold,
    async close() {
      clearInterval(timer);
      await running;
    },
  };
}
