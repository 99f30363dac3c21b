import { CreationOptional, DataTypes, InferAttributes, InferCreationAttributes, Model, Sequelize } from 'sequelize';

/**
 * OAuth2 client credentials (RFC 6749 §4.4) the worker uses to get the endpoint's bearer token
 * (docs/design.md §14.4), stored as given; the api shows `client_secret` masked.
 */
export interface EndpointAuth {
  type: 'oauth2_client_credentials';
  token_url: string;
  client_id: string;
  client_secret: string;
  scope?: string;
  audience?: string;
}

/** A subscriber of post events (docs/design.md §3). `events` empty means every event. */
export class WebhookEndpoint extends Model<InferAttributes<WebhookEndpoint>, InferCreationAttributes<WebhookEndpoint>> {
  declare id: CreationOptional<number>;
  declare url: string;
  /** `whsec_` + base64 of random bytes, unless the operator gave one. */
  declare secret: string;
  /** The secret before the last rotation; deliveries are also signed with it until it expires. */
  declare previousSecret: CreationOptional<string | null>;
  /** When the worker stops signing with `previousSecret`; null exactly when it is null. */
  declare previousSecretExpiresAt: CreationOptional<Date | null>;
  declare events: CreationOptional<string[]>;
  declare active: CreationOptional<boolean>;
  declare description: string | null;
  /** The owning user, or null for an operator endpoint. */
  declare userId: CreationOptional<number | null>;
  /** Why the endpoint was disabled, e.g. the receiver answered 410 Gone. */
  declare disabledReason: CreationOptional<string | null>;
  /** Set when the endpoint was deleted over the API: it is gone from the API and inactive. */
  declare deletedAt: CreationOptional<Date | null>;
  /** The first failed attempt since the last success; null while healthy (auto-disable, docs/design.md §6.4). */
  declare failingSince: CreationOptional<Date | null>;
  /** The open failure episode, null while healthy; set exactly when `failingSince` is. */
  declare episodeId: CreationOptional<string | null>;
  /** Failed attempts in the open episode; 0 while healthy. */
  declare consecutiveFailures: CreationOptional<number>;
  /** The last failed attempt's HTTP status; null when it got no answer or none failed yet. */
  declare lastFailureStatusCode: CreationOptional<number | null>;
  /** The last failed attempt's error; null when it got an answer or none failed yet. */
  declare lastFailureError: CreationOptional<string | null>;
  /** The operational events emitted in the open episode (`endpoint.failing`, `endpoint.disabled`). */
  declare episodeEvents: CreationOptional<string[]>;
  /** Static headers sent with every delivery, names lowercase. */
  declare headers: CreationOptional<Record<string, string>>;
  /** Attempts started per second across all workers; null for no limit. */
  declare rateLimitPerS: CreationOptional<number | null>;
  /** Matched against an event's data before a delivery is made; null matches all. */
  declare filter: CreationOptional<Record<string, unknown> | null>;
  declare ordering: CreationOptional<'unordered' | 'fifo'>;
  /** `hmac-sha256` (secret `whsec_...`) or `ed25519` (secret the private key `whsk_...`). */
  declare signatureScheme: CreationOptional<'hmac-sha256' | 'ed25519'>;
  /** An ed25519 endpoint's `whpk_` public key; null for HMAC. */
  declare publicKey: CreationOptional<string | null>;
  /**
   * How the worker authenticates to the endpoint beyond static headers (docs/design.md §14.4):
   * null, or OAuth2 client credentials (shared/operations/endpoints/auth.ts checks the shape).
   */
  declare auth: CreationOptional<EndpointAuth | null>;
  /** PEM certificate presented for mutual TLS to the endpoint's origin; null exactly when `clientKey` is. */
  declare clientCert: CreationOptional<string | null>;
  /** PEM private key of `clientCert`; never shown. */
  declare clientKey: CreationOptional<string | null>;
  /** The last FIFO sequence number given to a delivery to this endpoint. */
  declare fifoSequence: CreationOptional<string>;
  /**
   * Counts the endpoint's moves of `url` to another origin (docs/design.md §6.4): an attempt's answer
   * counts for the endpoint's health only while the epoch it started with is still this one.
   */
  declare originEpoch: CreationOptional<number>;
  declare createdAt: CreationOptional<Date>;
  declare updatedAt: CreationOptional<Date>;

  static initModel(this: typeof WebhookEndpoint, sequelize: Sequelize): typeof WebhookEndpoint {
    this.init(
      {
        id: { type: DataTypes.INTEGER, primaryKey: true, autoIncrement: true },
        url: { type: DataTypes.TEXT, allowNull: false },
        secret: { type: DataTypes.TEXT, allowNull: false },
        previousSecret: { type: DataTypes.TEXT, allowNull: true },
        previousSecretExpiresAt: { type: DataTypes.DATE, allowNull: true },
        events: { type: DataTypes.ARRAY(DataTypes.TEXT), allowNull: false, defaultValue: [] },
        active: { type: DataTypes.BOOLEAN, allowNull: false, defaultValue: true },
        description: { type: DataTypes.TEXT, allowNull: true },
        userId: { type: DataTypes.INTEGER, allowNull: true },
        disabledReason: { type: DataTypes.TEXT, allowNull: true },
        deletedAt: { type: DataTypes.DATE, allowNull: true },
        failingSince: { type: DataTypes.DATE, allowNull: true },
        episodeId: { type: DataTypes.TEXT, allowNull: true },
        consecutiveFailures: { type: DataTypes.INTEGER, allowNull: false, defaultValue: 0 },
        lastFailureStatusCode: { type: DataTypes.INTEGER, allowNull: true },
        lastFailureError: { type: DataTypes.TEXT, allowNull: true },
        episodeEvents: { type: DataTypes.ARRAY(DataTypes.TEXT), allowNull: false, defaultValue: [] },
        headers: { type: DataTypes.JSONB, allowNull: false, defaultValue: {} },
        rateLimitPerS: { type: DataTypes.INTEGER, allowNull: true, field: 'rate_limit_per_s' },
        filter: { type: DataTypes.JSONB, allowNull: true },
        ordering: { type: DataTypes.TEXT, allowNull: false, defaultValue: 'unordered' },
        signatureScheme: { type: DataTypes.TEXT, allowNull: false, defaultValue: 'hmac-sha256' },
        publicKey: { type: DataTypes.TEXT, allowNull: true },
        auth: { type: DataTypes.JSONB, allowNull: true },
        clientCert: { type: DataTypes.TEXT, allowNull: true },
        clientKey: { type: DataTypes.TEXT, allowNull: true },
        fifoSequence: { type: DataTypes.BIGINT, allowNull: false, defaultValue: 0 },
        originEpoch: { type: DataTypes.INTEGER, allowNull: false, defaultValue: 0 },
        createdAt: DataTypes.DATE,
        updatedAt: DataTypes.DATE,
      },
      { sequelize, modelName: 'WebhookEndpoint', tableName: 'webhook_endpoints', underscored: true, timestamps: true },
    );
    return this;
  }
}
