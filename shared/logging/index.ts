import pino, { type Logger, type LoggerOptions } from 'pino';
import type { Config } from '../config';

/**
 * pino options for a service: its level, and pino-pretty (pino's own transport: coloured,
 * one line per entry) when the output is a terminal outside production. Anything else
 * (a pipe, a file, a container's log, NODE_ENV=production) gets pino's JSON lines.
 *
 * @param base - fields on every line, e.g. `{ service: 'webhook-worker' }`
 * @param output - where the lines go; its `isTTY` decides the format
 */
export function loggerOptions(
  config: Pick<Config, 'logLevel' | 'nodeEnv'>,
  base?: Record<string, unknown>,
  output: { isTTY?: boolean } = process.stdout,
): LoggerOptions {
  const options: LoggerOptions = { level: config.logLevel, ...(base ? { base } : {}) };
  if (!output.isTTY || config.nodeEnv === 'production' || config.logLevel === 'silent') return options;
  return {
    ...options,
    transport: { target: 'pino-pretty', options: { colorize: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' } },
  };
}

/** A standalone pino logger with {@link loggerOptions} (processes without Fastify: the worker). */
export function createLogger(config: Pick<Config, 'logLevel' | 'nodeEnv'>, base?: Record<string, unknown>): Logger {
  return pino(loggerOptions(config, base));
}

/** A start-up failure a user can act on: one line on stderr naming the variable, no stack trace, exit 1. */
export function failStart(service: string, message: string): never {
  process.stderr.write(`${service}: ${message}\n`);
  process.exit(1);
}

/**
 * Fails the start with one line when `error` is a port already in use (EADDRINUSE) or not
 * allowed (EACCES), naming the port and the variable that sets it; returns otherwise.
 */
export function failIfPortUnusable(service: string, error: unknown, port: number, variable: string): void {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'EADDRINUSE') failStart(service, `port ${port} is already in use (${variable}): stop the other process or set ${variable}`);
  if (code === 'EACCES') failStart(service, `port ${port} is not allowed for this user (${variable}): set ${variable} to a port above 1023`);
}
