import { CreationOptional, DataTypes, InferAttributes, InferCreationAttributes, Model, Sequelize } from 'sequelize';

/**
 * A row of `service_keys` (docs/design.md §4): another service's or an operator's credential. Only the
 * sha256 of the `sk_` key is stored; `revokedAt` set means it no longer authenticates.
 */
export class ServiceKey extends Model<InferAttributes<ServiceKey>, InferCreationAttributes<ServiceKey>> {
  declare id: CreationOptional<number>;
  declare name: string;
  /** Lowercase hex sha256 of the key's UTF-8 bytes. */
  declare keyHash: string;
  /** webhooks:send, webhooks:read, endpoints:read, endpoints:write, or `*` for all. */
  declare scopes: CreationOptional<string[]>;
  declare revokedAt: CreationOptional<Date | null>;
  /** Updated at most about once a minute per api process, never on every request. */
  declare lastUsedAt: CreationOptional<Date | null>;
  declare createdAt: CreationOptional<Date>;
  declare updatedAt: CreationOptional<Date>;

  static initModel(this: typeof ServiceKey, sequelize: Sequelize): typeof ServiceKey {
    this.init(
      {
        id: { type: DataTypes.INTEGER, primaryKey: true, autoIncrement: true },
        name: { type: DataTypes.STRING(255), allowNull: false },
        keyHash: { type: DataTypes.CHAR(64), allowNull: false, unique: true },
        scopes: { type: DataTypes.ARRAY(DataTypes.TEXT), allowNull: false, defaultValue: [] },
        revokedAt: { type: DataTypes.DATE, allowNull: true },
        lastUsedAt: { type: DataTypes.DATE, allowNull: true },
        createdAt: DataTypes.DATE,
        updatedAt: DataTypes.DATE,
      },
      { sequelize, modelName: 'ServiceKey', tableName: 'service_keys', underscored: true, timestamps: true },
    );
    return this;
  }
}
