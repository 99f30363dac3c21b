import { CreationOptional, DataTypes, InferAttributes, InferCreationAttributes, Model, Sequelize } from 'sequelize';
import { keyOf } from '../partitions';

/** One HTTP attempt of a delivery (docs/design.md §3.4): status code or error, duration, first 2 KB of the answer. */
export class WebhookAttempt extends Model<InferAttributes<WebhookAttempt>, InferCreationAttributes<WebhookAttempt>> {
  declare id: CreationOptional<number>;
  declare deliveryId: string;
  /** 1-based, unique per delivery. */
  declare attemptNumber: number;
  declare statusCode: number | null;
  declare error: string | null;
  declare durationMs: number;
  declare responseBody: string | null;
  /** The URL the attempt went to (its endpoint's as it was then); null for attempts recorded before URLs were. */
  declare url: CreationOptional<string | null>;
  declare attemptedAt: CreationOptional<Date>;
  /** Its delivery's `created_at`, its partition key; by default the delivery id's time. */
  declare deliveryCreatedAt: CreationOptional<Date>;

  static initModel(this: typeof WebhookAttempt, sequelize: Sequelize): typeof WebhookAttempt {
    this.init(
      {
        id: { type: DataTypes.BIGINT, primaryKey: true, autoIncrement: true },
        deliveryId: { type: DataTypes.TEXT, allowNull: false },
        attemptNumber: { type: DataTypes.INTEGER, allowNull: false },
        statusCode: { type: DataTypes.INTEGER, allowNull: true },
        error: { type: DataTypes.TEXT, allowNull: true },
        durationMs: { type: DataTypes.INTEGER, allowNull: false },
        responseBody: { type: DataTypes.TEXT, allowNull: true },
        url: { type: DataTypes.TEXT, allowNull: true },
        attemptedAt: { type: DataTypes.DATE, allowNull: false, defaultValue: DataTypes.NOW },
        deliveryCreatedAt: { type: DataTypes.DATE, allowNull: false },
      },
      {
        sequelize,
        modelName: 'WebhookAttempt',
        tableName: 'webhook_attempts',
        underscored: true,
        timestamps: false,
        hooks: {
          beforeValidate: (attempt) => {
            attempt.deliveryCreatedAt ??= keyOf(attempt.deliveryId) ?? attempt.deliveryCreatedAt;
          },
        },
      },
    );
    return this;
  }
}
