import { CreationOptional, DataTypes, InferAttributes, InferCreationAttributes, Model, Sequelize } from 'sequelize';

/** The receiver's record of a webhook it has seen, keyed by webhook-id (docs/design.md §3). */
export class WebhookInbox extends Model<InferAttributes<WebhookInbox>, InferCreationAttributes<WebhookInbox>> {
  declare webhookId: string;
  declare topic: string;
  declare event: string | null;
  /** Lowercase hex sha256 of the accepted body; null for rows older than the column. */
  declare bodySha256: CreationOptional<string | null>;
  declare receivedAt: CreationOptional<Date>;
  declare processedAt: CreationOptional<Date | null>;

  static initModel(this: typeof WebhookInbox, sequelize: Sequelize): typeof WebhookInbox {
    this.init(
      {
        webhookId: { type: DataTypes.TEXT, primaryKey: true },
        topic: { type: DataTypes.TEXT, allowNull: false },
        event: { type: DataTypes.TEXT, allowNull: true },
        bodySha256: { type: DataTypes.TEXT, allowNull: true, field: 'body_sha256' },
        receivedAt: { type: DataTypes.DATE, allowNull: false, defaultValue: DataTypes.NOW },
        processedAt: { type: DataTypes.DATE, allowNull: true },
      },
      { sequelize, modelName: 'WebhookInbox', tableName: 'webhook_inbox', underscored: true, timestamps: false },
    );
    return this;
  }
}
