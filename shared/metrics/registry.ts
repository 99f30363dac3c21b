import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/**
 * The Prometheus metrics of one process. Each process owns one registry (not prom-client's
 * global one), so tests that build several apps in one process never clash on names.
 */
export interface Metrics {
  registry: Registry;
  /** HTTP requests served, by method, route pattern and status code; seconds. */
  httpRequestDuration: Histogram<'method' | 'route' | 'status_code'>;
  /** Webhook deliveries finished, by outcome: succeeded, retried, failed, disabled. */
  deliveries: Counter<'outcome'>;
  /** Duration of one HTTP delivery attempt, seconds, by status class (2xx, 4xx, 5xx, error). */
  attemptDuration: Histogram<'status_class'>;
  /**
   * Jobs in the `webhooks` queue by state (waiting, active, delayed, failed) and partition (`0`
   * for the unpartitioned queue, else 1..64; docs/design.md §13.1), set at scrape time.
   */
  queueJobs: Gauge<'state' | 'partition'>;
  /** Deliveries recorded in the outbox but not yet handed to the queue, set at scrape time. */
  outboxPending: Gauge;
  /**
   * Circuits that are not closed, by gate (`e:<endpoint id>`, ad-hoc `o:<origin>`): 1 open,
   * 0.5 half-open; closed circuits have no series. Set at scrape time from Redis (worker).
   */
  circuitState: Gauge<'gate' | 'state'>;
  /** Endpoints the worker disabled (410 Gone, or failing for WEBHOOK_DISABLE_AFTER_S). */
  endpointsDisabled: Counter;
  /**
   * Day partitions past WEBHOOK_RETENTION_DAYS that the last prune kept because their
   * deliveries still hold pending or delivering rows (docs/design.md §3.4), set by each prune (worker).
   */
  retentionDaysKept: Gauge;
  /** Failed deliveries dropped with their day partition by retention. */
  retentionFailedDropped: Counter;
  /**
   * With Redis Sentinel (docs/design.md §13.2): 1 on the `address` of the primary in use, set at scrape
   * time; no series without Sentinels or while disconnected.
   */
  redisPrimary: Gauge<'address'>;
  /**
   * Reads the replica did not serve although asked to (docs/design.md §13.3), by reason: unreachable,
   * lagging (more than REPLICA_MAX_LAG_S behind), error (a query failed there); the primary
   * answered them (api).
   */
  dbReplicaSkipped: Counter<'reason'>;
}

/**
 * Creates the registry with Node's default process metrics and this system's metrics.
 *
 * @param service - the `service` label on every metric (api-a, api-b, receiver, webhook-worker)
 */
export function createMetrics(service: string): Metrics {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  collectDefaultMetrics({ register: registry });
  const registers = [registry];
  return {
    registry,
    httpRequestDuration: new Histogram({
      name: 'http_request_duration_seconds',
      help: 'HTTP requests served, by method, route and status code',
      labelNames: ['method', 'route', 'status_code'],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers,
    }),
    deliveries: new Counter({
      name: 'webhook_deliveries_total',
      help: 'Webhook deliveries finished or rescheduled, by outcome',
      labelNames: ['outcome'],
      registers,
    }),
    attemptDuration: new Histogram({
      name: 'webhook_attempt_duration_seconds',
      help: 'Duration of one webhook delivery attempt, by status class',
      labelNames: ['status_class'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15],
      registers,
    }),
    queueJobs: new Gauge({
      name: 'webhook_queue_jobs',
      help: 'Jobs in the webhooks queue by state and partition',
      labelNames: ['state', 'partition'],
      registers,
    }),
    outboxPending: new Gauge({
      name: 'webhook_outbox_pending',
      help: 'Deliveries recorded but not yet handed to the queue',
      registers,
    }),
    circuitState: new Gauge({
      name: 'webhook_circuit_state',
      help: 'Endpoint circuits that are not closed: 1 open, 0.5 half_open',
      labelNames: ['gate', 'state'],
      registers,
    }),
    endpointsDisabled: new Counter({
      name: 'webhook_endpoints_disabled_total',
      help: 'Endpoints disabled by the worker (410 Gone or failing too long)',
      registers,
    }),
    retentionDaysKept: new Gauge({
      name: 'webhook_retention_days_kept',
      help: 'Day partitions past the retention window kept because they still hold unfinished deliveries',
      registers,
    }),
    retentionFailedDropped: new Counter({
      name: 'webhook_retention_failed_dropped_total',
      help: 'Failed deliveries dropped with their day partition by retention',
      registers,
    }),
    redisPrimary: new Gauge({
      name: 'redis_primary',
      help: 'The Redis primary in use behind Sentinels: 1 on its address',
      labelNames: ['address'],
      registers,
    }),
    dbReplicaSkipped: new Counter({
      name: 'db_replica_skipped_total',
      help: 'Reads the read replica did not serve (the primary did), by reason: unreachable, lagging, error',
      labelNames: ['reason'],
      registers,
    }),
  };
}
