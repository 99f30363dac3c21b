import { Sequelize } from 'sequelize';
import { destroySpoiledOnRelease, prepareConnection } from './connection-setup';
import { IdempotencyKey } from './models/idempotency-key';
import { PortalLink } from './models/portal-link';
import { PortalSession } from './models/portal-session';
import { Post } from './models/post';
import { ServiceKey } from './models/service-key';
import { User } from './models/user';
import { WebhookAttempt } from './models/webhook-attempt';
import { WebhookDelivery } from './models/webhook-delivery';
import { type EndpointAuth, WebhookEndpoint } from './models/webhook-endpoint';
import { WebhookEventType } from './models/webhook-event-type';
import { WebhookInbox } from './models/webhook-inbox';

/** The model classes, for types; query through `db.models`, which are bound to a connection. */
export { IdempotencyKey, PortalLink, PortalSession, Post, ServiceKey, User, WebhookAttempt, WebhookDelivery, WebhookEndpoint, WebhookEventType, WebhookInbox };
export type { DeliveryStatus } from './models/webhook-delivery';
export type { EndpointAuth };
export type { PortalScope } from './models/portal-link';

/** The model classes of one connection; see {@link createDatabase}. */
export interface Models {
  User: typeof User;
  Post: typeof Post;
  WebhookEndpoint: typeof WebhookEndpoint;
  WebhookDelivery: typeof WebhookDelivery;
  WebhookAttempt: typeof WebhookAttempt;
  WebhookInbox: typeof WebhookInbox;
  WebhookEventType: typeof WebhookEventType;
  ServiceKey: typeof ServiceKey;
  IdempotencyKey: typeof IdempotencyKey;
  PortalLink: typeof PortalLink;
  PortalSession: typeof PortalSession;
}

export { errorChain, isDatabaseUnavailable, isOutcomeUnknown, isTransactionConflict, StandbyReachedError } from './errors';

// While PostgreSQL is unreachable a request must fail within seconds (503, docs/design.md §6.7), not wait
// for a 30 s pool acquire or an operating system's minutes-long TCP connect.
/** Bound of one new connection's TCP and start-up handshake, ms. */
const CONNECT_TIMEOUT_MS = 10_000;
/** Bound of the wait for a pooled connection beyond one connect, ms (15 s in all by default). */
const POOL_WAIT_BEYOND_CONNECT_MS = 5_000;

export interface Database {
  sequelize: Sequelize;
  models: Models;
  /** Resolves when PostgreSQL answers a trivial query; rejects otherwise. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

export interface DatabaseOptions {
  /** Pool size; each process keeps at most this many connections. Default 10. */
  poolMax?: number;
  /** Receives each SQL statement; default: no SQL logging. */
  logging?: (sql: string) => void;
  /**
   * A read replica's pool (docs/design.md §13.3): its connections are to a standby by design, so they are
   * kept (a primary's pool closes them as an outage). Default false.
   */
  acceptStandby?: boolean;
  /** Bound of one new connection's handshake and set-up, ms; default 10,000. The pool waits this plus 5 s at most. */
  connectTimeoutMs?: number;
}

/**
 * Connects Sequelize to PostgreSQL and initialises every model. The schema itself is
 * owned by the migrations in `migrations/`; this never calls `sync()`.
 *
 * Each call binds fresh subclasses of the model classes to its own connection, so several
 * databases in one process (tests, tools) never share models: use `db.models.X`, never the
 * exported classes, for queries.
 *
 * @param url - a postgres:// connection URL (DATABASE_URL)
 * @returns the connection, the models and `close()`; connecting is lazy, so use `ping()`
 *   to fail fast at start
 */
export function createDatabase(url: string, options: DatabaseOptions = {}): Database {
  const connectTimeoutMs = options.connectTimeoutMs ?? CONNECT_TIMEOUT_MS;
  const sequelize = new Sequelize(url, {
    dialect: 'postgres',
    logging: options.logging ?? false,
    pool: { max: options.poolMax ?? 10, min: 0, idle: 10_000, acquire: connectTimeoutMs + POOL_WAIT_BEYOND_CONNECT_MS },
    // keepAlive: a PostgreSQL host that vanished is noticed on idle connections too.
    dialectOptions: { connectionTimeoutMillis: connectTimeoutMs, keepAlive: true },
    define: { underscored: true },
    hooks: {
      afterConnect: (connection) => prepareConnection(connection, options.acceptStandby ?? false, connectTimeoutMs),
    },
  });
  destroySpoiledOnRelease(sequelize);
  const models: Models = {
    User: class extends User {}.initModel(sequelize),
    Post: class extends Post {}.initModel(sequelize),
    WebhookEndpoint: class extends WebhookEndpoint {}.initModel(sequelize),
    WebhookDelivery: class extends WebhookDelivery {}.initModel(sequelize),
    WebhookAttempt: class extends WebhookAttempt {}.initModel(sequelize),
    WebhookInbox: class extends WebhookInbox {}.initModel(sequelize),
    WebhookEventType: class extends WebhookEventType {}.initModel(sequelize),
    ServiceKey: class extends ServiceKey {}.initModel(sequelize),
    IdempotencyKey: class extends IdempotencyKey {}.initModel(sequelize),
    PortalLink: class extends PortalLink {}.initModel(sequelize),
    PortalSession: class extends PortalSession {}.initModel(sequelize),
  };
  return {
    sequelize,
    models,
    async ping() {
      await sequelize.query('SELECT 1');
    },
    close: () => sequelize.close(),
  };
}
