import { DatabaseError } from 'sequelize';
import { createDatabase, Database, isDatabaseUnavailable } from '../../shared/db';
import { rawQuery, withRawConnection } from '../../shared/db/raw-query';
import { createTestEnvironment, TestEnvironment } from '../support/environment';

describe('raw queries on the Sequelize pool', () => {
  let env: TestEnvironment;
  let db: Database;

  beforeAll(async () => {
    env = await createTestEnvironment();
    db = createDatabase(env.databaseUrl, { poolMax: 1 });
  });

  afterAll(async () => {
    await db.close();
    await env.cleanup();
  });

  it('when a prepared statement runs twice, then both give the rows with the types sequelize.query gives', async () => {
    const statement = { name: 'raw-query-test', text: 'SELECT $1::int AS n, now() AS at, $2::text AS s', values: [7, 'x'] };
    const first = await rawQuery<{ n: number; at: Date; s: string }>(db.sequelize, statement);
    const second = await rawQuery<{ n: number; at: Date; s: string }>(db.sequelize, { ...statement, values: [8, 'y'] });
    expect(first).toEqual([{ n: 7, at: expect.any(Date), s: 'x' }]);
    expect(second).toEqual([{ n: 8, at: expect.any(Date), s: 'y' }]);
  });

  it('when a statement fails, then the error is a Sequelize DatabaseError carrying the SQLSTATE, not an outage, and the connection stays usable', async () => {
    const failure = await rawQuery(db.sequelize, { text: 'SELECT 1 / 0' }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(DatabaseError);
    expect((failure as DatabaseError).parent).toMatchObject({ code: '22012' });
    expect(isDatabaseUnavailable(failure)).toBe(false);
    // poolMax 1: the connection was given back.
    await expect(rawQuery(db.sequelize, { text: 'SELECT 1 AS one' })).resolves.toEqual([{ one: 1 }]);
  });

  it('when the server ends the connection mid-statement, then the error counts as an outage and the pool replaces the connection', async () => {
    const failure = await withRawConnection(db.sequelize, (connection) =>
      connection.query({ text: 'SELECT pg_terminate_backend(pg_backend_pid())' }),
    ).catch((error: unknown) => error);
    expect(isDatabaseUnavailable(failure)).toBe(true);
    await expect(rawQuery(db.sequelize, { text: 'SELECT 1 AS one' })).resolves.toEqual([{ one: 1 }]);
  });

  it('when PostgreSQL refuses connections, then the error counts as an outage', async () => {
    const away = createDatabase('postgres://postgres@127.0.0.1:1/none');
    try {
      const failure = await rawQuery(away.sequelize, { text: 'SELECT 1' }).catch((error: unknown) => error);
      expect(isDatabaseUnavailable(failure)).toBe(true);
    } finally {
      await away.close();
    }
  });
});
