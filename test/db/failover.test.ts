import { Client } from 'pg';
import { ConnectionError, QueryTypes } from 'sequelize';
import { createDatabase, Database, isDatabaseUnavailable } from '../../shared/db';
import { rawQuery } from '../../shared/db/raw-query';
import { createTestEnvironment, TestEnvironment } from '../support/environment';
import { startPrimaryWithStandby, type PrimaryWithStandby } from '../support/own-postgres';
import { waitFor } from '../support/wait-for';

/** Backend pids of client sessions on the server at `url`, the asking one aside. */
async function sessionsOn(url: string): Promise<number[]> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() ORDER BY pid`,
    );
    return rows.map((row) => row.pid);
  } finally {
    await client.end();
  }
}


const backendPid = async (db: Database): Promise<number> =>
  ((await db.sequelize.query<{ pid: number }>('SELECT pg_backend_pid() AS pid', { type: QueryTypes.SELECT, plain: true })) as { pid: number }).pid;

describe('PostgreSQL failover: the pool follows the address to the new primary (docs/design.md §13.3)', () => {
  let cluster: PrimaryWithStandby;
  let db: Database;

  beforeAll(async () => {
    cluster = await startPrimaryWithStandby({ synchronous: true });
    const admin = new Client({ connectionString: cluster.primary.url() });
    await admin.connect();
    await admin.query('CREATE TABLE marks (n int PRIMARY KEY)');
    await admin.end();
    await cluster.caughtUp();
    db = createDatabase(cluster.url(), { poolMax: 2 });
  }, 60_000);

  afterAll(async () => {
    await db?.close();
    await cluster?.destroy();
  });

  it('when a new connection reaches a standby, then it is closed at once and the statement fails as an outage, not as a read-only error', async () => {
    const onStandby = createDatabase(cluster.standby.url(), { poolMax: 1 });
    try {
      const failure = await onStandby.sequelize.query('SELECT 1').catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(ConnectionError);
      expect(isDatabaseUnavailable(failure)).toBe(true);
      const raw = await rawQuery(onStandby.sequelize, { text: 'SELECT 1' }).catch((error: unknown) => error);
      expect(isDatabaseUnavailable(raw)).toBe(true);
      await waitFor(async () => (await sessionsOn(cluster.standby.url())).length === 0 || false, 10_000, 'no session of ours left on the standby');
    } finally {
      await onStandby.close();
    }
  });

  it('when the address reaches the standby, then writes fail as an outage; once it is promoted and the address moves, the same pool writes again', async () => {
    await db.sequelize.query('INSERT INTO marks VALUES (1)');
    cluster.address.retarget(cluster.standby.port);
    for (const n of [2, 3]) {
      const failure = await db.sequelize.query(`INSERT INTO marks VALUES (${n})`).catch((error: unknown) => error);
      expect(isDatabaseUnavailable(failure)).toBe(true);
    }
    await cluster.stopPrimary();
    await cluster.promote();
    cluster.address.retarget(cluster.standby.port);
    await db.sequelize.query('INSERT INTO marks VALUES (4)');
    expect(await db.sequelize.query('SELECT n FROM marks ORDER BY n', { type: QueryTypes.SELECT })).toEqual([{ n: 1 }, { n: 4 }]);
  });
});

describe('a connection that meets a read-only server leaves the pool', () => {
  let env: TestEnvironment;
  let db: Database;

  beforeAll(async () => {
    env = await createTestEnvironment();
    db = createDatabase(env.databaseUrl, { poolMax: 1 });
    await db.sequelize.query('CREATE TABLE marks (n int PRIMARY KEY)');
  });

  afterAll(async () => {
    await db.close();
    await env.cleanup();
  });

  // A session that turned read-only stands for one still open to a server that is a standby now.
  it.each([
    ['a Sequelize statement', (database: Database) => database.sequelize.query('INSERT INTO marks VALUES (1)')],
    ['a raw statement', (database: Database) => rawQuery(database.sequelize, { text: 'INSERT INTO marks VALUES (1)' })],
    ['a transaction', (database: Database) => database.sequelize.transaction((transaction) => database.sequelize.query('INSERT INTO marks VALUES (1)', { transaction }))],
  ])('when %s fails with 25006 (read-only), then it is an outage, the connection is closed, and the next statement runs on a new one', async (_, write) => {
    await db.sequelize.query('SET default_transaction_read_only = on');
    const spoiled = await backendPid(db);
    const failure = await write(db).catch((error: unknown) => error);
    expect((failure as { parent?: { code?: string } }).parent?.code).toBe('25006');
    expect(isDatabaseUnavailable(failure)).toBe(true);
    await waitFor(async () => !(await sessionsOn(env.databaseUrl)).includes(spoiled) || false, 10_000, 'the spoiled session closed');
    expect(await backendPid(db)).not.toBe(spoiled);
    await db.sequelize.query('INSERT INTO marks VALUES (1)');
    await db.sequelize.query('DELETE FROM marks');
  });
});
