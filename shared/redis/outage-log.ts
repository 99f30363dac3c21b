import type { RedisClient } from './client';

/** The logger methods an outage log uses (pino and Fastify's logger both fit). */
export interface OutageLogger {
  warn(fields: object, message: string): void;
  info(fields: object, message: string): void;
  debug(fields: object, message: string): void;
}

/** Turns a stream of connection errors into two lines per outage: its start and its end. */
export interface OutageLog {
  /** A connection error: the first of an outage is a warning, the others debug lines. */
  error(error: Error): void;
  /** The connection is ready: ends the outage, if one was on, with an info line and its duration. */
  ready(): void;
  /** True between an outage's first error and the next `ready()`. */
  readonly down: boolean;
}

/**
 * An outage log for one dependency. ioredis reports every failed reconnect (every 0.2 to
 * 2 s while Redis is away); the log shows the outage once, with its reason, and its end.
 *
 * @param subject - what may be unreachable, e.g. `Redis at 127.0.0.1:6379 (REDIS_URL)`
 * @param effect - what the process does meanwhile, e.g. `serving Layout A reads from the database`
 */
export function createOutageLog(logger: OutageLogger, subject: string, effect?: string): OutageLog {
  let since: number | null = null;
  return {
    error(error) {
      if (since !== null) return logger.debug({ reason: error.message }, 'still unreachable');
      since = Date.now();
      logger.warn({ reason: error.message }, `${subject} unreachable, retrying${effect ? `: ${effect}` : ''}`);
    },
    ready() {
      if (since === null) return;
      const outageSeconds = Math.round((Date.now() - since) / 100) / 10;
      since = null;
      logger.info({ outageSeconds }, `${subject} reachable again`);
    },
    get down() {
      return since !== null;
    },
  };
}

/** Logs `connection`'s outages through {@link createOutageLog} (its `error` and `ready` events). */
export function logRedisOutages(connection: RedisClient, logger: OutageLogger, subject: string, effect?: string): OutageLog {
  const outages = createOutageLog(logger, subject, effect);
  connection.on('error', (error: Error) => outages.error(error));
  connection.on('ready', () => outages.ready());
  return outages;
}
