import { CreationOptional, DataTypes, InferAttributes, InferCreationAttributes, Model, Sequelize } from 'sequelize';

/** What a portal link or session may do (docs/design.md §11.6): `read` the GET routes, or `manage` also change things. */
export type PortalScope = 'read' | 'manage';

/**
 * A row of `portal_links` (docs/design.md §11.6): a one-time link into the dashboard for one user. Only
 * the sha256 of its token is stored; `usedAt` is set by the one exchange that opens it.
 */
export class PortalLink extends Model<InferAttributes<PortalLink>, InferCreationAttributes<PortalLink>> {
  declare id: CreationOptional<number>;
  declare userId: number;
  /** Lowercase hex sha256 of the link's token. */
  declare tokenHash: string;
  declare scope: PortalScope;
  /** Life of the session the link opens, seconds (60..86400). */
  declare sessionTtlS: number;
  /** The link can be opened until then. */
  declare expiresAt: Date;
  declare usedAt: CreationOptional<Date | null>;
  declare revokedAt: CreationOptional<Date | null>;
  /** The service key that minted it; null from the CLI. */
  declare createdByKeyId: CreationOptional<number | null>;
  declare createdAt: CreationOptional<Date>;

  static initModel(this: typeof PortalLink, sequelize: Sequelize): typeof PortalLink {
    this.init(
      {
        id: { type: DataTypes.INTEGER, primaryKey: true, autoIncrement: true },
        userId: { type: DataTypes.INTEGER, allowNull: false },
        tokenHash: { type: DataTypes.CHAR(64), allowNull: false, unique: true },
        scope: { type: DataTypes.TEXT, allowNull: false },
        sessionTtlS: { type: DataTypes.INTEGER, allowNull: false },
        expiresAt: { type: DataTypes.DATE, allowNull: false },
        usedAt: { type: DataTypes.DATE, allowNull: true },
        revokedAt: { type: DataTypes.DATE, allowNull: true },
        createdByKeyId: { type: DataTypes.INTEGER, allowNull: true },
        createdAt: { type: DataTypes.DATE, allowNull: false },
      },
      { sequelize, modelName: 'PortalLink', tableName: 'portal_links', underscored: true, timestamps: false },
    );
    return this;
  }
}
