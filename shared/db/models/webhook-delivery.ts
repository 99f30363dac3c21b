import { CreationOptional, DataTypes, InferAttributes, InferCreationAttributes, Model, Sequelize } from 'sequelize';
import type { HmacAlgo } from '../../webhook/signing';
import { keyOf } from '../partitions';

export type DeliveryStatus = 'pending' | 'delivering' | 'succeeded' | 'failed';

/**
 * One webhook to deliver: the outbox row and the delivery log (docs/design.md §3.2, §6.1).
 * `id` is the webhook-id, stable across retries, and the BullMQ job id.
 * The bytes signed and sent live once in its event (`webhook_events`, docs/design.md §3.2).
 */
export class WebhookDelivery extends Model<InferAttributes<WebhookDelivery>, InferCreationAttributes<WebhookDelivery>> {
  declare id: string;
  declare endpointId: number | null;
  /** The owner of its endpoint (null for an operator endpoint), or the user an ad-hoc send from Node named. */
  declare userId: CreationOptional<number | null>;
  declare url: string;
  declare method: CreationOptional<string>;
  declare event: string | null;
  /** Legacy copy of the bytes: rows made before events were stored once; null since. */
  declare body: CreationOptional<string | null>;
  /** The event this delivers (webhook_events.id); null on legacy rows. */
  declare eventId: CreationOptional<string | null>;
  declare headers: CreationOptional<Record<string, string>>;
  /** Secret of an ad-hoc send; endpoint deliveries use the endpoint's current secret. */
  declare secret: CreationOptional<string | null>;
  declare algo: CreationOptional<HmacAlgo>;
  declare signatureHeader: CreationOptional<string>;
  declare status: CreationOptional<DeliveryStatus>;
  declare attempts: CreationOptional<number>;
  declare nextAttemptAt: CreationOptional<Date | null>;
  declare lastStatusCode: CreationOptional<number | null>;
  declare lastError: CreationOptional<string | null>;
  /** Set once the job is in the queue; null rows are picked up by the outbox relay. */
  declare enqueuedAt: CreationOptional<Date | null>;
  declare deliveredAt: CreationOptional<Date | null>;
  /** Its endpoint was deleted: never signed with the derived secret, never sent again. */
  declare endpointDeleted: CreationOptional<boolean>;
  /** A redelivery: exactly one new attempt, also when its job is revived after a Redis loss. */
  declare oneShot: CreationOptional<boolean>;
  /** W3C Trace Context of the request that wrote it, when tracing is on. */
  declare traceparent: CreationOptional<string | null>;
  /** Place in its FIFO endpoint's order, taken when the row is written; null for other endpoints. */
  declare sequence: CreationOptional<string | null>;
  /** Its partition key: for a time-ordered id, always the id's millisecond. */
  declare createdAt: CreationOptional<Date>;
  declare updatedAt: CreationOptional<Date>;

  static initModel(this: typeof WebhookDelivery, sequelize: Sequelize): typeof WebhookDelivery {
    this.init(
      {
        id: { type: DataTypes.TEXT, primaryKey: true },
        endpointId: { type: DataTypes.INTEGER, allowNull: true },
        userId: { type: DataTypes.INTEGER, allowNull: true },
        url: { type: DataTypes.TEXT, allowNull: false },
        method: { type: DataTypes.STRING(10), allowNull: false, defaultValue: 'POST' },
        event: { type: DataTypes.TEXT, allowNull: true },
        body: { type: DataTypes.TEXT, allowNull: true },
        eventId: { type: DataTypes.TEXT, allowNull: true },
        headers: { type: DataTypes.JSONB, allowNull: false, defaultValue: {} },
        secret: { type: DataTypes.TEXT, allowNull: true },
        algo: { type: DataTypes.STRING(10), allowNull: false, defaultValue: 'sha256' },
        signatureHeader: { type: DataTypes.TEXT, allowNull: false, defaultValue: 'X-Signature' },
        status: { type: DataTypes.STRING(16), allowNull: false, defaultValue: 'pending' },
        attempts: { type: DataTypes.INTEGER, allowNull: false, defaultValue: 0 },
        nextAttemptAt: { type: DataTypes.DATE, allowNull: true },
        lastStatusCode: { type: DataTypes.INTEGER, allowNull: true },
        lastError: { type: DataTypes.TEXT, allowNull: true },
        enqueuedAt: { type: DataTypes.DATE, allowNull: true },
        deliveredAt: { type: DataTypes.DATE, allowNull: true },
        endpointDeleted: { type: DataTypes.BOOLEAN, allowNull: false, defaultValue: false },
        oneShot: { type: DataTypes.BOOLEAN, allowNull: false, defaultValue: false },
        traceparent: { type: DataTypes.TEXT, allowNull: true },
        sequence: { type: DataTypes.BIGINT, allowNull: true },
        createdAt: DataTypes.DATE,
        updatedAt: DataTypes.DATE,
      },
      {
        sequelize,
        modelName: 'WebhookDelivery',
        tableName: 'webhook_deliveries',
        underscored: true,
        timestamps: true,
        hooks: {
          // A new row's created_at is its id's time (docs/design.md §3.3), whatever the caller gave.
          beforeValidate: (delivery) => {
            const at = keyOf(delivery.id);
            if (at && delivery.isNewRecord) delivery.createdAt = at;
          },
          beforeBulkCreate: (deliveries) => {
            for (const delivery of deliveries) {
              const at = keyOf(delivery.id);
              if (at) delivery.createdAt = at;
            }
          },
        },
      },
    );
    return this;
  }
}
