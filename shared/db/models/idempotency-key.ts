import { CreationOptional, DataTypes, InferAttributes, InferCreationAttributes, Model, Sequelize } from 'sequelize';

/**
 * A row of `idempotency_keys` (docs/design.md §12.1): the first answer to a request sent with an
 * `Idempotency-Key`, per principal. `responseStatus` null means the request is still running.
 */
export class IdempotencyKey extends Model<InferAttributes<IdempotencyKey>, InferCreationAttributes<IdempotencyKey>> {
  /** `user:<id>` or `key:<service key id>`. */
  declare principal: string;
  declare idempotencyKey: string;
  /** sha256 hex of the method, URL and body: the same key with another request is refused. */
  declare fingerprint: string;
  declare responseStatus: CreationOptional<number | null>;
  declare responseBody: CreationOptional<string | null>;
  declare responseContentType: CreationOptional<string | null>;
  declare createdAt: CreationOptional<Date>;
  declare expiresAt: Date;
  /** While unanswered: the claim holds until then unless its process renews it. */
  declare leaseExpiresAt: CreationOptional<Date | null>;
  /** The post a create committed under this key, written in the post's own statement. */
  declare postPid: CreationOptional<number | null>;

  static initModel(this: typeof IdempotencyKey, sequelize: Sequelize): typeof IdempotencyKey {
    this.init(
      {
        principal: { type: DataTypes.TEXT, primaryKey: true },
        idempotencyKey: { type: DataTypes.STRING(255), primaryKey: true },
        fingerprint: { type: DataTypes.CHAR(64), allowNull: false },
        responseStatus: { type: DataTypes.INTEGER, allowNull: true },
        responseBody: { type: DataTypes.TEXT, allowNull: true },
        responseContentType: { type: DataTypes.TEXT, allowNull: true },
        createdAt: { type: DataTypes.DATE, allowNull: false },
        expiresAt: { type: DataTypes.DATE, allowNull: false },
        leaseExpiresAt: { type: DataTypes.DATE, allowNull: true },
        postPid: { type: DataTypes.INTEGER, allowNull: true },
      },
      { sequelize, modelName: 'IdempotencyKey', tableName: 'idempotency_keys', underscored: true, timestamps: false },
    );
    return this;
  }
}
