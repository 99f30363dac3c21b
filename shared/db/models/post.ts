import { CreationOptional, DataTypes, InferAttributes, InferCreationAttributes, Model, Sequelize } from 'sequelize';

/**
 * A row of `posts` (docs/design.md §3.1), shared by both layouts: Layout A's pids come from the
 * table's sequence (>= 100000), Layout B sets a random 5-digit pid itself.
 */
export class Post extends Model<InferAttributes<Post>, InferCreationAttributes<Post>> {
  declare pid: CreationOptional<number>;
  declare postUuid: string;
  declare userId: number;
  declare postTitle: string;
  declare postImage: string | null;
  declare postBody: string;
  declare createdAt: CreationOptional<Date>;
  declare updatedAt: CreationOptional<Date>;

  static initModel(this: typeof Post, sequelize: Sequelize): typeof Post {
    this.init(
      {
        pid: { type: DataTypes.INTEGER, primaryKey: true, autoIncrement: true },
        postUuid: { type: DataTypes.UUID, allowNull: false, unique: true },
        userId: { type: DataTypes.INTEGER, allowNull: false },
        postTitle: { type: DataTypes.STRING(255), allowNull: false },
        postImage: { type: DataTypes.STRING(255), allowNull: true },
        postBody: { type: DataTypes.TEXT, allowNull: false },
        createdAt: DataTypes.DATE,
        updatedAt: DataTypes.DATE,
      },
      { sequelize, modelName: 'Post', tableName: 'posts', underscored: true, timestamps: true },
    );
    return this;
  }
}
