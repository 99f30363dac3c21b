import type { Sequelize } from 'sequelize';
import { ensureDayPartitions } from './partitions';

/** What the keeper logs through; pino's `Logger` fits. */
export interface KeeperLogger {
  info(object: object, message: string): void;
  warn(object: object, message: string): void;
}

/** Options of {@link startDayPartitionKeeper}. */
export interface DayPartitionKeeperOptions {
  sequelize: Sequelize;
  logger: KeeperLogger;
  /** How often to check, ms: MAINTENANCE_INTERVAL_MS (docs/design.md §3.5: at most a minute). */
  intervalMs: number;
}

/** The running check of {@link startDayPartitionKeeper}. */
export interface DayPartitionKeeper {
  /** Checks now (joining a check under way); never rejects: a failure is logged. */
  check(): Promise<void>;
  /** Stops the timer and waits for a check under way. */
  close(): Promise<void>;
}

/**
 * Keeps the day partitions through today + 7 in every api and worker process (docs/design.md §3.5):
 * a check at once and every `intervalMs` after, on a timer of the process's own
 * (unref'd), so the horizon depends neither on a restart nor on anything held in Redis. A
 * check costs one catalog query when nothing is missing ({@link ensureDayPartitions}). Any
 * failure (PostgreSQL away, a lock timeout) is logged and left to the next check.
 */
export function startDayPartitionKeeper(options: DayPartitionKeeperOptions): DayPartitionKeeper {
  const { sequelize, logger, intervalMs } = options;
  let running: Promise<void> | undefined;

  function check(): Promise<void> {
    running ??= ensureDayPartitions(sequelize)
      .then((made) => {
        if (made > 0) logger.info({ made }, 'made the day partitions ahead');
      })
      .catch((error: unknown) => logger.warn({ err: error }, 'could not check the day partitions ahead; the next check tries again'))
      .finally(() => {
        running = undefined;
      });
    return running;
  }

  void check();
  const timer = setInterval(() => void check(), intervalMs);
  timer.unref();
  return {
    check,
    async close() {
      clearInterval(timer);
      await running;
    },
  };
}
