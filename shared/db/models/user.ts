import { CreationOptional, DataTypes, InferAttributes, InferCreationAttributes, Model, Sequelize } from 'sequelize';

/** A row of `users` (docs/design.md §3.1). Only the sha256 of a bearer token is stored. Not cached. */
export class User extends Model<InferAttributes<User>, InferCreationAttributes<User>> {
  declare userId: CreationOptional<number>;
  declare userName: string;
  declare userEmail: string;
  declare apiTokenHash: string | null;
  declare quotaLimit: CreationOptional<number>;
  declare quotaUsed: CreationOptional<number>;
  declare quotaPeriodStart: CreationOptional<Date>;
  declare createdAt: CreationOptional<Date>;
  declare updatedAt: CreationOptional<Date>;

  static initModel(this: typeof User, sequelize: Sequelize): typeof User {
    this.init(
      {
        userId: { type: DataTypes.INTEGER, primaryKey: true, autoIncrement: true, validate: { min: 1, max: 99999 } },
        userName: { type: DataTypes.STRING(255), allowNull: false },
        userEmail: { type: DataTypes.STRING(320), allowNull: false, unique: true },
        apiTokenHash: { type: DataTypes.CHAR(64), allowNull: true, unique: true },
        quotaLimit: { type: DataTypes.INTEGER, allowNull: false, defaultValue: 0 },
        quotaUsed: { type: DataTypes.INTEGER, allowNull: false, defaultValue: 0 },
        quotaPeriodStart: { type: DataTypes.DATE, allowNull: false, defaultValue: DataTypes.NOW },
        createdAt: DataTypes.DATE,
        updatedAt: DataTypes.DATE,
      },
      { sequelize, modelName: 'User', tableName: 'users', underscored: true, timestamps: true },
    );
    return this;
  }
}
