import { CreationOptional, DataTypes, InferAttributes, InferCreationAttributes, Model, Sequelize } from 'sequelize';
import type { PortalScope } from './portal-link';

/**
 * A row of `portal_sessions` (docs/design.md §11.6): the `ps_` session one portal link was exchanged
 * for, stored as its sha256. It ends at `expiresAt`, when its link is revoked, or with its user.
 */
export class PortalSession extends Model<InferAttributes<PortalSession>, InferCreationAttributes<PortalSession>> {
  declare id: CreationOptional<number>;
  declare linkId: number;
  declare userId: number;
  /** Lowercase hex sha256 of the `ps_` token. */
  declare tokenHash: string;
  declare scope: PortalScope;
  declare expiresAt: Date;
  declare createdAt: CreationOptional<Date>;

  static initModel(this: typeof PortalSession, sequelize: Sequelize): typeof PortalSession {
    this.init(
      {
        id: { type: DataTypes.INTEGER, primaryKey: true, autoIncrement: true },
        linkId: { type: DataTypes.INTEGER, allowNull: false, unique: true },
        userId: { type: DataTypes.INTEGER, allowNull: false },
        tokenHash: { type: DataTypes.CHAR(64), allowNull: false, unique: true },
        scope: { type: DataTypes.TEXT, allowNull: false },
        expiresAt: { type: DataTypes.DATE, allowNull: false },
        createdAt: { type: DataTypes.DATE, allowNull: false },
      },
      { sequelize, modelName: 'PortalSession', tableName: 'portal_sessions', underscored: true, timestamps: false },
    );
    return this;
  }
}
