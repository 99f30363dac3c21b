import Joi from 'joi';
import devDefaults from './dev-defaults.json';

export type ServiceName = 'api' | 'receiver' | 'worker' | 'cli';
export type HmacAlgo = 'sha256' | 'sha384' | 'sha512';

/** The whole runtime configuration, validated once at start (DESIGN §2). */
export interface Config {
  nodeEnv: string;
  service: ServiceName;
  databaseUrl: string;
  redisUrl: string;
  /** Prefix of every Redis key this system writes (BullMQ queues and the Layout A cache). */
  redisPrefix: string;
  apiLayout: 'a' | 'b';
  host: string;
  port: number;
  /** Base of `link` and `image` URLs in Layout A, without a trailing slash. */
  appUrl: string;
  appKey: string;
  webhookSalt: string;
  /** Per-attempt delivery timeout in the worker, milliseconds. */
  webhookTimeoutMs: number;
  /** Seconds to wait before each retry; attempts in all = length + 1. */
  webhookRetrySchedule: number[];
  /** Refuse delivery targets that resolve to loopback, private or link-local addresses. */
  webhookBlockPrivate: boolean;
  workerConcurrency: number;
  workerShutdownTimeoutMs: number;
  /** BullMQ job lock of the worker, ms; a killed worker's jobs return to the queue about this long after. */
  workerLockDurationMs: number;
  /** Port of the worker's /health, /ready and /metrics server; 0 = none. */
  workerMetricsPort: number;
  /** How often the api's outbox relay looks for deliveries that missed the queue, milliseconds. */
  outboxRelayIntervalMs: number;
  quotaPeriodS: number;
  uploadDir: string;
  /**
   * Secrets the receiver verifies with, newest first (RECEIVER_SECRET, whitespace-separated);
   * a webhook signed with any one of them is accepted, so a sender's rotation needs no downtime.
   */
  receiverSecrets: string[];
  receiverToleranceS: number;
  logLevel: string;
  adminUser?: string;
  adminPassword?: string;
  /** Human-readable notes for the log at start, such as dev defaults in use. */
  warnings: string[];
}

/** A bad or missing environment variable; the message names the variable. */
export class ConfigError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ConfigError';
  }
}

const DEFAULT_PORTS: Record<ServiceName, number> = { api: 3000, receiver: 3002, worker: 3003, cli: 0 };

const schema = Joi.object({
  NODE_ENV: Joi.string().default('development'),
  DATABASE_URL: Joi.string().uri({ scheme: ['postgres', 'postgresql'] }).default('postgres://postgres:postgres@127.0.0.1:5432/posts'),
  REDIS_URL: Joi.string().uri({ scheme: ['redis', 'rediss'] }).default('redis://127.0.0.1:6379'),
  REDIS_PREFIX: Joi.string().pattern(/^[A-Za-z0-9_.-]+$/).default('pw'),
  API_LAYOUT: Joi.string().lowercase().valid('a', 'b').default('a'),
  HOST: Joi.string().default('0.0.0.0'),
  PORT: Joi.number().integer().min(0).max(65535),
  APP_URL: Joi.string().uri({ scheme: ['http', 'https'] }),
  APP_KEY: Joi.string().min(16),
  WEBHOOK_SALT: Joi.string().default('app.webhook.salt'),
  WEBHOOK_TIMEOUT_MS: Joi.number().integer().min(1).default(15000),
  WEBHOOK_RETRY_SCHEDULE: Joi.string()
    .pattern(/^\s*\d+(\.\d+)?(\s*,\s*\d+(\.\d+)?)*\s*$/)
    .default('5,300,1800,7200,18000,36000,36000'),
  WEBHOOK_BLOCK_PRIVATE: Joi.boolean(),
  WORKER_CONCURRENCY: Joi.number().integer().min(1).max(1000).default(50),
  WORKER_SHUTDOWN_TIMEOUT_MS: Joi.number().integer().min(0).default(10000),
  WORKER_LOCK_DURATION_MS: Joi.number().integer().min(500).default(30000),
  WORKER_METRICS_PORT: Joi.number().integer().min(0).max(65535).default(3003),
  OUTBOX_RELAY_INTERVAL_MS: Joi.number().integer().min(50).default(5000),
  QUOTA_PERIOD_S: Joi.number().integer().min(1).default(86400),
  UPLOAD_DIR: Joi.string().default('./storage/uploads'),
  RECEIVER_SECRET: Joi.string().custom(parseSecretList),
  RECEIVER_TOLERANCE_S: Joi.number().integer().min(1).default(300),
  LOG_LEVEL: Joi.string().valid('fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent').default('info'),
  ADMIN_USER: Joi.string(),
  ADMIN_PASSWORD: Joi.string(),
}).unknown(true);

/** Every environment variable loadConfig reads, for checks that deployment files name no unknown one. */
export const CONFIG_VARIABLES: readonly string[] = Object.keys(schema.describe().keys ?? {});

/**
 * Reads and validates the environment once.
 *
 * @param env - variables to read, usually `process.env`
 * @param service - which process is starting; picks the default PORT (api 3000, receiver 3002, worker 3003)
 * @returns the typed configuration; `warnings` lists dev defaults that were filled in
 * @throws ConfigError naming the variable when a value is invalid, or when APP_KEY or
 *   RECEIVER_SECRET is missing with NODE_ENV=production
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, service: ServiceName = 'api'): Config {
  const { value, error } = schema.validate(stripEmpty(env), { abortEarly: true, convert: true });
  if (error) {
    const detail = error.details[0];
    throw new ConfigError(`Invalid environment variable ${String(detail.path[0])}: ${detail.message}`, { cause: error });
  }
  const production = value.NODE_ENV === 'production';
  const warnings: string[] = [];
  const appKey = secretOrDevDefault('APP_KEY', value.APP_KEY, devDefaults.appKey, production, warnings);
  const receiverSecrets = secretOrDevDefault(
    'RECEIVER_SECRET',
    value.RECEIVER_SECRET as string[] | undefined,
    [devDefaults.receiverSecret],
    production,
    warnings,
  );
  const port: number = value.PORT ?? DEFAULT_PORTS[service];

  return {
    nodeEnv: value.NODE_ENV,
    service,
    databaseUrl: value.DATABASE_URL,
    redisUrl: value.REDIS_URL,
    redisPrefix: value.REDIS_PREFIX,
    apiLayout: value.API_LAYOUT,
    host: value.HOST,
    port,
    appUrl: String(value.APP_URL ?? `http://localhost:${port}`).replace(/\/+$/, ''),
    appKey,
    webhookSalt: value.WEBHOOK_SALT,
    webhookTimeoutMs: value.WEBHOOK_TIMEOUT_MS,
    webhookRetrySchedule: String(value.WEBHOOK_RETRY_SCHEDULE)
      .split(',')
      .map((seconds) => Number(seconds.trim())),
    webhookBlockPrivate: value.WEBHOOK_BLOCK_PRIVATE ?? production,
    workerConcurrency: value.WORKER_CONCURRENCY,
    workerShutdownTimeoutMs: value.WORKER_SHUTDOWN_TIMEOUT_MS,
    workerLockDurationMs: value.WORKER_LOCK_DURATION_MS,
    workerMetricsPort: value.WORKER_METRICS_PORT,
    outboxRelayIntervalMs: value.OUTBOX_RELAY_INTERVAL_MS,
    quotaPeriodS: value.QUOTA_PERIOD_S,
    uploadDir: value.UPLOAD_DIR,
    receiverSecrets,
    receiverToleranceS: value.RECEIVER_TOLERANCE_S,
    logLevel: value.LOG_LEVEL,
    adminUser: value.ADMIN_USER,
    adminPassword: value.ADMIN_PASSWORD,
    warnings,
  };
}

/** An empty variable (`FOO=`) means "use the default", as in docker compose files. */
function stripEmpty(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, val] of Object.entries(env)) if (val !== undefined && val !== '') out[key] = val;
  return out;
}

const WHSEC_BASE64 = /^whsec_(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * RECEIVER_SECRET: one secret, or several separated by whitespace while a sender rotates
 * (newest first). Each has at least 8 characters; a `whsec_` one must be base64 after the
 * prefix, or every webhook would fail to verify long after start.
 */
function parseSecretList(raw: string): string[] {
  const secrets = raw.trim().split(/\s+/);
  for (const secret of secrets) {
    if (secret.length < 8) throw new Error('every secret needs at least 8 characters');
    if (secret.startsWith('whsec_') && !WHSEC_BASE64.test(secret)) {
      throw new Error('a whsec_ secret must be followed by base64');
    }
  }
  return secrets;
}

function secretOrDevDefault<T>(
  name: string,
  given: T | undefined,
  devDefault: T,
  production: boolean,
  warnings: string[],
): T {
  if (given) return given;
  if (production) throw new ConfigError(`Missing environment variable ${name}: required when NODE_ENV=production`);
  warnings.push(`${name} is not set: using the public development default. Never do this in production.`);
  return devDefault;
}
