import { QueryTypes } from 'sequelize';
import { createDatabase, Database } from '../../shared/db';
import { createMigrator } from '../../shared/db/migrate';
import { TestEnvironment, createTestEnvironment } from '../support/environment';

const MIGRATION = '20261127000300-filter-match-bounded.js';

/** docs/design.md §14.3: the filter's matching function that never raises, and its way back. */
describe('the bounded filter-matching migration', () => {
  let env: TestEnvironment;
  let db: Database;

  beforeAll(async () => {
    env = await createTestEnvironment();
    db = createDatabase(env.config.databaseUrl, { poolMax: 2 });
  });

  afterAll(async () => {
    await db.close();
    await env.cleanup();
  });

  const matches = async (filter: unknown, data: unknown) =>
    (
      await db.sequelize.query<{ matches: boolean }>('SELECT webhook_filter_matches($1::jsonb, $2::jsonb) AS matches', {
        bind: [JSON.stringify(filter), JSON.stringify(data)],
        type: QueryTypes.SELECT,
      })
    )[0].matches;

  it('when undone and redone, then the previous function comes back (raising on a string filter) and then the bounded one', async () => {
    const migrator = createMigrator(db.sequelize);
    await migrator.down({ to: MIGRATION });
    await expect(matches('text', { a: 1 })).rejects.toThrow(/jsonb_each/);
    expect(await matches({ tags: 'red' }, { tags: ['blue', 'red'] })).toBe(true);

    await migrator.up();
    expect(await matches('text', { a: 1 })).toBe(false);
    expect(await matches({ tags: 'red' }, { tags: ['blue', 'red'] })).toBe(true);
  });
});
