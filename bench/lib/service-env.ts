import { randomBytes } from 'node:crypto';
import { BenchSettings } from './settings';

/** Per-run secrets every service of the run shares (never the public development defaults). */
const APP_KEY = randomBytes(32).toString('hex');
const RECEIVER_SECRET = `whsec_${randomBytes(32).toString('base64')}`;

/**
 * The environment of one of our services in a benchmark: production mode (what users run),
 * warn-level logs (request logging would otherwise dominate small requests, and the baselines
 * log nothing), the run's database and a Redis prefix of its own, private targets allowed
 * because every endpoint of the run is on 127.0.0.1, and a rate limit far above any load
 * generator's rate (one user sends everything), so its cost is measured but it never refuses;
 * likewise the per-endpoint concurrency cap.
 */
export function serviceEnv(
  settings: BenchSettings,
  databaseUrl: string,
  redisPrefix: string,
  extra: Record<string, string> = {},
): NodeJS.ProcessEnv {
  return {
    NODE_ENV: 'production',
    LOG_LEVEL: 'warn',
    HOST: '127.0.0.1',
    DATABASE_URL: databaseUrl,
    REDIS_URL: settings.redisUrl,
    REDIS_PREFIX: redisPrefix,
    APP_KEY,
    RECEIVER_SECRET,
    WEBHOOK_BLOCK_PRIVATE: 'false',
    RATE_LIMIT_PER_MIN: '1000000000',
    // The per-endpoint cap at its maximum: every run sends to one endpoint, so the cap's cost is measured but it never limits.
    WEBHOOK_ENDPOINT_CONCURRENCY: '1000',
    ...extra,
  };
}
