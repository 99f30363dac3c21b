import { isIP } from 'node:net';
import Joi from 'joi';
import devDefaults from './dev-defaults.json';
import { parseFrameAncestors } from './frame-ancestors';

export type ServiceName = 'api' | 'receiver' | 'worker' | 'cli';

/** The whole runtime configuration, validated once at start (docs/design.md §2). */
export interface Config {
  nodeEnv: string;
  service: ServiceName;
  databaseUrl: string;
  /**
   * A streaming replica the operations API's lists and stats read (DATABASE_REPLICA_URL,
   * docs/design.md §13.3); undefined = every read on the primary.
   */
  databaseReplicaUrl?: string;
  /**
   * A replica further behind than this is not read (the primary is), seconds; also how long
   * after a principal's write its lists read the primary (REPLICA_MAX_LAG_S).
   */
  replicaMaxLagS: number;
  redisUrl: string;
  /** Prefix of every Redis key this system writes (BullMQ queues and the Layout A cache). */
  redisPrefix: string;
  apiLayout: 'a' | 'b';
  /** The interface the api, the receiver and the worker's metrics listen on: HOST, else 127.0.0.1 (0.0.0.0 in production). */
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
  /**
   * REQUEST_TIMEOUT_MS: the api and the receiver answer 408 to a request not received whole
   * (headers and body) within this, milliseconds; headers alone get at most 10 s of it.
   */
  requestTimeoutMs: number;
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
  /**
   * Hostnames (matched exactly against the URL's host, before resolution) and CIDRs (matched
   * against the resolved address) that may be private even with the SSRF guard on.
   */
  webhookPrivateAllowlist: string[];
  /**
   * `http://[user:password@]host:port` of the forward proxy every delivery leaves through
   * (WEBHOOK_PROXY_URL, docs/design.md §14.2); undefined = deliveries connect directly. It holds the
   * proxy's credentials: log {@link Config} fields one by one, never this one whole.
   */
  webhookProxyUrl?: string;
  /**
   * Targets sent directly despite the proxy (WEBHOOK_NO_PROXY, lower case): `*`, hostnames
   * (a name covers its subdomains; a leading dot is dropped), IP addresses and CIDRs.
   */
  webhookNoProxy: string[];
  /** Attempts in flight to one endpoint (ad-hoc: one URL origin) across all workers. */
  webhookEndpointConcurrency: number;
  /** Consecutive failed attempts that open an endpoint's circuit. */
  webhookBreakerFailures: number;
  /** An endpoint failing with no success for this long is disabled, seconds. */
  webhookDisableAfterS: number;
  /** Succeeded deliveries, their attempts and inbox rows older than this are pruned, days. */
  webhookRetentionDays: number;
  /** A queued delivery whose job vanished from Redis is queued again within this, ms. */
  outboxReviveAfterMs: number;
  /**
   * How often every api and worker checks the day partitions ahead, and a worker its daily
   * schedules in Redis, ms (docs/design.md §3.5: at least once a minute).
   */
  maintenanceIntervalMs: number;
  /** Requests per minute per principal (per IP before auth); 0 = off. */
  rateLimitPerMin: number;
  /** How long an Idempotency-Key claim holds without renewal, ms (docs/design.md §15: at most 60 s). */
  idempotencyLeaseMs: number;
  /** Endpoints one user may own at once (MAX_ENDPOINTS_PER_USER, docs/design.md §11.2); operator endpoints are not counted. */
  maxEndpointsPerUser: number;
  /** Receiver: accept deliveries carrying only X-Signature (then dedupe every body by its sha256). */
  receiverAcceptXSignatureOnly: boolean;
  /** `host:port` seeds of a Redis Cluster; empty = a single Redis at redisUrl. */
  redisClusterNodes: { host: string; port: number }[];
  /**
   * `host:port` of Redis Sentinels (docs/design.md §13.2); empty = no Sentinel. With them,
   * every connection reaches the primary they name `redisSentinelName`, and `redisUrl` lends
   * only its db, user, password and TLS.
   */
  redisSentinels: { host: string; port: number }[];
  /** The primary's name the Sentinels monitor (REDIS_SENTINEL_NAME); set when redisSentinels is. */
  redisSentinelName?: string;
  /** Password of the Sentinels themselves (not of the data nodes). */
  redisSentinelPassword?: string;
  /** ACL user of the Sentinels themselves. */
  redisSentinelUsername?: string;
  /** Reach the Sentinels over TLS (the data nodes' TLS comes from `rediss://` in redisUrl). */
  redisSentinelTls: boolean;
  /**
   * BullMQ queues the deliveries are spread over, 1..64 (docs/design.md §13.1): with more than one,
   * partition i's keys carry the hash tag `{webhooks-<i>}` after the prefix.
   */
  webhookQueuePartitions: number;
  /**
   * Origins that may embed the portal page `/portal` in an iframe, beside the api's own
   * (PORTAL_FRAME_ANCESTORS, docs/design.md §11.6); empty: the api's own origin only.
   */
  portalFrameAncestors: string[];
  /** Seed the fixed development credentials even with NODE_ENV=production. */
  seedDemo: boolean;
  /** OTLP/HTTP endpoint for traces; undefined = tracing off. */
  otelExporterOtlpEndpoint?: string;
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
  DATABASE_REPLICA_URL: Joi.string().uri({ scheme: ['postgres', 'postgresql'] }),
  REPLICA_MAX_LAG_S: Joi.number().min(0).max(3600).default(5),
  REDIS_URL: Joi.string().uri({ scheme: ['redis', 'rediss'] }).default('redis://127.0.0.1:6379'),
  REDIS_PREFIX: Joi.string().pattern(/^[A-Za-z0-9_.{}-]+$/).default('pw'),
  API_LAYOUT: Joi.string().lowercase().valid('a', 'b').default('a'),
  HOST: Joi.string(),
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
  REQUEST_TIMEOUT_MS: Joi.number().integer().min(1000).max(3600000).default(30000),
  QUOTA_PERIOD_S: Joi.number().integer().min(1).default(86400),
  UPLOAD_DIR: Joi.string().default('./storage/uploads'),
  RECEIVER_SECRET: Joi.string().custom(parseSecretList),
  RECEIVER_TOLERANCE_S: Joi.number().integer().min(1).default(300),
  LOG_LEVEL: Joi.string().valid('fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent').default('info'),
  ADMIN_USER: Joi.string(),
  ADMIN_PASSWORD: Joi.string(),
  WEBHOOK_PRIVATE_ALLOWLIST: Joi.string().custom(parseAllowlist),
  WEBHOOK_PROXY_URL: Joi.string().custom(parseProxyUrl),
  WEBHOOK_NO_PROXY: Joi.string().custom(parseNoProxy),
  WEBHOOK_ENDPOINT_CONCURRENCY: Joi.number().integer().min(1).max(1000).default(10),
  WEBHOOK_BREAKER_FAILURES: Joi.number().integer().min(1).default(5),
  WEBHOOK_DISABLE_AFTER_S: Joi.number().integer().min(1).default(432000),
  WEBHOOK_RETENTION_DAYS: Joi.number().integer().min(1).default(30),
  OUTBOX_REVIVE_AFTER_MS: Joi.number().integer().min(100).default(2000),
  MAINTENANCE_INTERVAL_MS: Joi.number().integer().min(100).max(60000).default(30000),
  RATE_LIMIT_PER_MIN: Joi.number().integer().min(0).default(6000),
  IDEMPOTENCY_LEASE_MS: Joi.number().integer().min(1000).max(60000).default(60000),
  MAX_ENDPOINTS_PER_USER: Joi.number().integer().min(0).default(100),
  RECEIVER_ACCEPT_X_SIGNATURE_ONLY: Joi.boolean().default(false),
  REDIS_CLUSTER_NODES: Joi.string().custom(parseHostPorts),
  REDIS_SENTINELS: Joi.string().custom(parseHostPorts),
  REDIS_SENTINEL_NAME: Joi.string().pattern(/^[A-Za-z0-9_.-]+$/),
  REDIS_SENTINEL_PASSWORD: Joi.string(),
  REDIS_SENTINEL_USERNAME: Joi.string(),
  REDIS_SENTINEL_TLS: Joi.boolean().default(false),
  WEBHOOK_QUEUE_PARTITIONS: Joi.number().integer().min(1).max(64).default(1),
  PORTAL_FRAME_ANCESTORS: Joi.string().custom(parseFrameAncestors),
  SEED_DEMO: Joi.boolean().default(false),
  OTEL_EXPORTER_OTLP_ENDPOINT: Joi.string().uri({ scheme: ['http', 'https'] }),
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
  const defaulted: string[] = [];
  const appKey = secretOrDevDefault('APP_KEY', value.APP_KEY, devDefaults.appKey, production, defaulted);
  const receiverSecrets = secretOrDevDefault(
    'RECEIVER_SECRET',
    value.RECEIVER_SECRET as string[] | undefined,
    [devDefaults.receiverSecret],
    production,
    defaulted,
  );
  // One line for all of them: a developer's every start shows it, so it stays short.
  if (defaulted.length > 0) {
    warnings.push(`${defaulted.join(' and ')} not set: using public development defaults. Never do this in production.`);
  }
  const port: number = value.PORT ?? DEFAULT_PORTS[service];
  const redisClusterNodes: { host: string; port: number }[] = value.REDIS_CLUSTER_NODES ?? [];
  const redisSentinels: { host: string; port: number }[] = value.REDIS_SENTINELS ?? [];
  if (redisSentinels.length > 0 && redisClusterNodes.length > 0) {
    throw new ConfigError(
      'Invalid environment variables REDIS_SENTINELS and REDIS_CLUSTER_NODES: set one of them (Sentinel follows one primary, a Cluster shards over several), not both',
    );
  }
  if (redisSentinels.length > 0 && !value.REDIS_SENTINEL_NAME) {
    throw new ConfigError('Missing environment variable REDIS_SENTINEL_NAME: required with REDIS_SENTINELS (the name the Sentinels monitor the primary by)');
  }
  const shards: number = value.WEBHOOK_QUEUE_PARTITIONS;
  // BullMQ's scripts touch several keys of a queue at once: in a cluster they must share a slot.
  // One partition: the prefix is that slot's hash tag. Several: each partition's queue name is
  // its own tag, and Redis hashes only a key's first `{...}`, so the prefix may have none.
  if (redisClusterNodes.length > 0 && shards === 1 && !/^\{[^{}]+\}$/.test(value.REDIS_PREFIX)) {
    throw new ConfigError(
      `Invalid environment variable REDIS_PREFIX: with REDIS_CLUSTER_NODES and one queue partition it must be a hash tag such as {pw}, got ${value.REDIS_PREFIX}`,
    );
  }
  if (redisClusterNodes.length > 0 && shards > 1 && /[{}]/.test(value.REDIS_PREFIX)) {
    throw new ConfigError(
      `Invalid environment variable REDIS_PREFIX: with REDIS_CLUSTER_NODES and WEBHOOK_QUEUE_PARTITIONS=${shards} it must have no braces (each partition brings its own hash tag), got ${value.REDIS_PREFIX}`,
    );
  }

  return {
    nodeEnv: value.NODE_ENV,
    service,
    databaseUrl: value.DATABASE_URL,
    databaseReplicaUrl: value.DATABASE_REPLICA_URL,
    replicaMaxLagS: value.REPLICA_MAX_LAG_S,
    redisUrl: value.REDIS_URL,
    redisPrefix: value.REDIS_PREFIX,
    apiLayout: value.API_LAYOUT,
    // Outside production the public development credentials are seeded and the SSRF guard is
    // off, so a local start stays on loopback; containers set HOST=0.0.0.0 themselves (docs/design.md §2).
    host: value.HOST ?? (production ? '0.0.0.0' : '127.0.0.1'),
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
    requestTimeoutMs: value.REQUEST_TIMEOUT_MS,
    quotaPeriodS: value.QUOTA_PERIOD_S,
    uploadDir: value.UPLOAD_DIR,
    receiverSecrets,
    receiverToleranceS: value.RECEIVER_TOLERANCE_S,
    logLevel: value.LOG_LEVEL,
    adminUser: value.ADMIN_USER,
    adminPassword: value.ADMIN_PASSWORD,
    webhookPrivateAllowlist: value.WEBHOOK_PRIVATE_ALLOWLIST ?? [],
    webhookProxyUrl: value.WEBHOOK_PROXY_URL,
    webhookNoProxy: value.WEBHOOK_NO_PROXY ?? [],
    webhookEndpointConcurrency: value.WEBHOOK_ENDPOINT_CONCURRENCY,
    webhookBreakerFailures: value.WEBHOOK_BREAKER_FAILURES,
    webhookDisableAfterS: value.WEBHOOK_DISABLE_AFTER_S,
    webhookRetentionDays: value.WEBHOOK_RETENTION_DAYS,
    outboxReviveAfterMs: value.OUTBOX_REVIVE_AFTER_MS,
    maintenanceIntervalMs: value.MAINTENANCE_INTERVAL_MS,
    rateLimitPerMin: value.RATE_LIMIT_PER_MIN,
    idempotencyLeaseMs: value.IDEMPOTENCY_LEASE_MS,
    maxEndpointsPerUser: value.MAX_ENDPOINTS_PER_USER,
    receiverAcceptXSignatureOnly: value.RECEIVER_ACCEPT_X_SIGNATURE_ONLY,
    redisClusterNodes,
    redisSentinels,
    redisSentinelName: redisSentinels.length > 0 ? value.REDIS_SENTINEL_NAME : undefined,
    redisSentinelPassword: value.REDIS_SENTINEL_PASSWORD,
    redisSentinelUsername: value.REDIS_SENTINEL_USERNAME,
    redisSentinelTls: value.REDIS_SENTINEL_TLS,
    webhookQueuePartitions: shards,
    portalFrameAncestors: value.PORTAL_FRAME_ANCESTORS ?? [],
    seedDemo: value.SEED_DEMO,
    otelExporterOtlpEndpoint: value.OTEL_EXPORTER_OTLP_ENDPOINT,
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
    if (secret.startsWith('whpk_') && !/^whpk_[A-Za-z0-9+/]{43}=$/.test(secret)) {
      throw new Error('a whpk_ public key must be followed by the base64 of 32 bytes');
    }
  }
  return secrets;
}

const HOSTNAME = /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;

/** WEBHOOK_PRIVATE_ALLOWLIST: comma-separated hostnames and CIDRs (`10.0.0.0/8`, `fd00::/8`). */
function parseAllowlist(raw: string): string[] {
  const entries = raw.split(',').map((entry) => entry.trim()).filter(Boolean);
  for (const entry of entries) {
    if (entry.includes('/')) {
      if (!isCidr(entry)) throw new Error(`${entry} is not a CIDR`);
    } else if (!HOSTNAME.test(entry) && isIP(entry) === 0) {
      throw new Error(`${entry} is neither a hostname nor a CIDR`);
    }
  }
  return entries.map((entry) => entry.toLowerCase());
}

/** True for `a.b.c.d/n` (n at most 32) or `x::/n` (n at most 128). */
function isCidr(entry: string): boolean {
  const [address, bits] = entry.split('/');
  const family = isIP(address);
  return family !== 0 && /^\d{1,3}$/.test(bits) && Number(bits) <= (family === 4 ? 32 : 128);
}

/**
 * WEBHOOK_PROXY_URL: an `http://` forward proxy, `http://[user:password@]host[:port]` (port 80
 * when absent), nothing after the authority. https targets still get end-to-end TLS, tunnelled
 * with CONNECT; TLS to the proxy itself (`https://`) and SOCKS are not offered. The messages
 * never repeat the value, which may hold a password.
 */
function parseProxyUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    throw new Error('it is not a URL; expected http://[user:password@]host:port');
  }
  if (url.protocol !== 'http:') throw new Error('it must be an http:// URL (https:// and socks proxies are not supported)');
  if (url.hostname === '') throw new Error('it has no host');
  if (url.pathname !== '/' || url.search !== '' || url.hash !== '') throw new Error('it must not have a path, query or fragment');
  return url.href.replace(/\/$/, '');
}

/**
 * WEBHOOK_NO_PROXY: comma-separated entries as curl reads NO_PROXY: `*`, hostnames (with or
 * without a leading dot; a name covers its subdomains), IP addresses and CIDRs. Ports are not
 * part of an entry.
 */
function parseNoProxy(raw: string): string[] {
  const entries = raw.split(',').map((entry) => entry.trim().toLowerCase()).filter(Boolean);
  for (const entry of entries) {
    if (entry === '*') continue;
    if (entry.includes('/')) {
      if (!isCidr(entry)) throw new Error(`${entry} is not a CIDR`);
    } else if (!HOSTNAME.test(entry.replace(/^\./, '')) && isIP(entry) === 0) {
      throw new Error(`${entry} is neither *, a hostname, an IP address nor a CIDR`);
    }
  }
  return entries;
}

/** REDIS_CLUSTER_NODES and REDIS_SENTINELS: comma-separated `host:port` (IPv6 in brackets). */
function parseHostPorts(raw: string): { host: string; port: number }[] {
  return raw
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean)
    .map((entry) => {
      const match = /^(.+):(\d{1,5})$/.exec(entry);
      const port = Number(match?.[2]);
      if (!match || port < 1 || port > 65535) throw new Error(`${entry} is not host:port`);
      return { host: match[1].replace(/^\[(.*)\]$/, '$1'), port };
    });
}

function secretOrDevDefault<T>(
  name: string,
  given: T | undefined,
  devDefault: T,
  production: boolean,
  defaulted: string[],
): T {
  if (given) return given;
  if (production) throw new ConfigError(`Missing environment variable ${name}: required when NODE_ENV=production`);
  defaulted.push(name);
  return devDefault;
}
