import Joi from 'joi';
import { SERIES_RANGES, SeriesRange } from '../../../../shared/operations';
import { validatedBy } from '../schemas/joi-validation';

// The stats routes' query and answers (docs/design.md §11.1, §14.1): an endpoint's health and the
// overview of every endpoint the caller may see, each with an optional `series` for charts.

/** `?series=1h|24h`; absent: no `series` in the answer. */
export const statsQuery = validatedBy(
  {
    type: 'object',
    properties: {
      series: {
        type: 'string',
        enum: [...SERIES_RANGES],
        description: 'Adds `series`: `1h` the last hour by minute (60 intervals), `24h` the last 24 hours by hour (24 intervals).',
      },
    },
  },
  Joi.object({ series: Joi.string().valid(...SERIES_RANGES) }).unknown(true),
);

export interface StatsQuery {
  series?: SeriesRange;
}

const latency = (percentile: string) => ({ type: 'integer', nullable: true, description: `${percentile} of the attempts' durations, ms; null without attempts.` });

/** One interval of a `series`. */
const seriesBucket = {
  type: 'object',
  required: ['start', 'succeeded', 'failed', 'retried', 'p50_ms', 'p95_ms'],
  properties: {
    start: { type: 'string', format: 'date-time', description: 'Start of the interval (UTC, a whole minute or hour); the last interval is the current one.' },
    succeeded: { type: 'integer', description: 'Attempts answered 2xx.' },
    failed: {
      type: 'integer',
      description: "Attempts answered otherwise (or with no answer) that were their delivery's last: the delivery was given up.",
    },
    retried: {
      type: 'integer',
      description: 'Attempts answered otherwise (or with no answer) after which their delivery was attempted again or has an attempt to come.',
    },
    p50_ms: latency('Median'),
    p95_ms: latency('95th percentile'),
  },
} as const;

const series = {
  type: 'array',
  items: seriesBucket,
  description: 'With `?series=`: attempts per interval by outcome and their latencies, oldest first, empty intervals included.',
} as const;

const rate24h = { type: 'number', nullable: true, description: '2xx attempts over all attempts of the last 24 h, 0 to 1; null without attempts.' } as const;

/** `GET /endpoints/{id}/stats`: the endpoint's health. */
export const endpointStatsObject = {
  type: 'object',
  required: [
    'attempts_24h',
    'success_rate_24h',
    'p50_ms',
    'p95_ms',
    'last_success_at',
    'last_failure_at',
    'circuit',
    'disabled_reason',
    'failing_since',
    'consecutive_failures',
  ],
  properties: {
    attempts_24h: { type: 'integer', description: 'Attempts of the last 24 h.' },
    success_rate_24h: rate24h,
    p50_ms: latency('Median, over the last 24 h,'),
    p95_ms: latency('95th percentile, over the last 24 h,'),
    last_success_at: { type: 'string', format: 'date-time', nullable: true },
    last_failure_at: { type: 'string', format: 'date-time', nullable: true },
    circuit: { type: 'string', enum: ['closed', 'open', 'half_open'] },
    disabled_reason: { type: 'string', nullable: true },
    failing_since: {
      type: 'string',
      format: 'date-time',
      nullable: true,
      description: "The first failed attempt of the endpoint's open failure episode (from a failure after a success until the next success or re-enable); null when none is open.",
    },
    consecutive_failures: { type: 'integer', nullable: true, description: 'Failed attempts in the open episode, without a success between; null when none is open.' },
    series,
  },
} as const;

/** `GET /stats`: every endpoint the caller may see, together. */
export const overviewStatsObject = {
  type: 'object',
  required: ['endpoints', 'endpoints_disabled', 'attempts_24h', 'success_rate_24h', 'p50_ms', 'p95_ms'],
  properties: {
    endpoints: { type: 'integer', description: 'Endpoints the caller may see (an operator: all; a user: their own).' },
    endpoints_disabled: { type: 'integer', description: 'Of those, how many are disabled.' },
    attempts_24h: { type: 'integer', description: 'Attempts to them in the last 24 h.' },
    success_rate_24h: rate24h,
    p50_ms: latency('Median, over the last 24 h,'),
    p95_ms: latency('95th percentile, over the last 24 h,'),
    series,
  },
} as const;
