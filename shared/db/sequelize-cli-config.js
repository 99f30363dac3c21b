// Loaded by sequelize-cli with require(): plain CommonJS. One environment, driven by
// DATABASE_URL, so `npx sequelize-cli db:migrate` works exactly like `npm run db:migrate`.
const url = process.env.DATABASE_URL || 'postgres://postgres:postgres@127.0.0.1:5432/posts';
const settings = { url, dialect: 'postgres', logging: false, migrationStorageTableName: 'SequelizeMeta', seederStorage: 'sequelize', seederStorageTableName: 'SequelizeData' };

module.exports = { development: settings, test: settings, production: settings };
