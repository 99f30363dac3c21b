import { CreationOptional, DataTypes, InferAttributes, InferCreationAttributes, Model, Sequelize } from 'sequelize';

/**
 * An event type an operator added to the catalog (docs/design.md §11.1); the built-in ones live in
 * code. `name` is lowercase and dotted; `schema` is a JSON Schema of the event's data.
 */
export class WebhookEventType extends Model<InferAttributes<WebhookEventType>, InferCreationAttributes<WebhookEventType>> {
  declare name: string;
  declare description: string | null;
  declare schema: object | null;
  declare createdAt: CreationOptional<Date>;
  declare updatedAt: CreationOptional<Date>;

  static initModel(this: typeof WebhookEventType, sequelize: Sequelize): typeof WebhookEventType {
    this.init(
      {
        name: { type: DataTypes.TEXT, primaryKey: true },
        description: { type: DataTypes.TEXT, allowNull: true },
        schema: { type: DataTypes.JSONB, allowNull: true },
        createdAt: DataTypes.DATE,
        updatedAt: DataTypes.DATE,
      },
      { sequelize, modelName: 'WebhookEventType', tableName: 'webhook_event_types', underscored: true, timestamps: true },
    );
    return this;
  }
}
