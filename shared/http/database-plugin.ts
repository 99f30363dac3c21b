import fp from 'fastify-plugin';
import type { Database } from '../db';

declare module 'fastify' {
  interface FastifyInstance {
    db: Database;
  }
}

/**
 * Decorates the instance with `db` and closes it when the app closes.
 * The database is created by the caller so that tests and processes own its URL.
 */
export const databasePlugin = fp<{ database: Database }>(
  async (app, { database }) => {
    app.decorate('db', database);
    app.addHook('onClose', async () => database.close());
  },
  { name: 'database' },
);
