import { existsSync } from 'node:fs';
import path from 'node:path';
import { Sequelize } from 'sequelize';
import { SequelizeStorage, Umzug } from 'umzug';

/** The folder holding `migrations/` and `seeders/`, found from this file both in the source tree and in dist/. */
export function projectRoot(): string {
  let dir = __dirname;
  while (!existsSync(path.join(dir, 'migrations')) || !existsSync(path.join(dir, 'package.json'))) {
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error('cannot find the migrations/ folder above ' + __dirname);
    dir = parent;
  }
  return dir;
}

/**
 * Builds an Umzug runner over the same sequelize-cli migration (or seeder) files and the
 * same bookkeeping tables (`SequelizeMeta`, `SequelizeData`), so that `npx sequelize-cli
 * db:migrate` and this runner always agree on what has been applied.
 *
 * @param sequelize - an open connection to the target database
 * @param kind - `migrations` (default) or `seeders`
 */
export function createMigrator(sequelize: Sequelize, kind: 'migrations' | 'seeders' = 'migrations') {
  const folder = path.join(projectRoot(), kind);
  return new Umzug({
    migrations: {
      glob: ['*.js', { cwd: folder }],
      resolve: ({ name, path: file, context }) => {
        // sequelize-cli migrations are CommonJS modules with up/down(queryInterface, Sequelize).
        const migration = require(file as string);
        return { name, up: () => migration.up(context, Sequelize), down: () => migration.down(context, Sequelize) };
      },
    },
    context: sequelize.getQueryInterface(),
    storage: new SequelizeStorage({ sequelize, tableName: kind === 'migrations' ? 'SequelizeMeta' : 'SequelizeData' }),
    logger: undefined,
  });
}
