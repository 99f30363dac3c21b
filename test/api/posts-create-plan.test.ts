import { postIdempotencyClaims } from '../../services/api/src/plugins/idempotency-store';
import { createBatchSql } from '../../shared/posts/create-batch';
import { createDatabase, Database } from '../../shared/db';
import { withRawConnection } from '../../shared/db/raw-query';
import { createTestEnvironment, TestEnvironment } from '../support/environment';
import { relationNodes } from '../support/plans';

describe('the plan of a batch of creates', () => {
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

  it('When the posts table grew from empty to 10,000 rows with no ANALYZE since, then the plan the service keeps for a random-pid create still probes posts by primary key, never reading the whole table', async () => {
    await db.sequelize.query(`INSERT INTO users (user_id, user_name, user_email, api_token_hash, quota_limit) VALUES (1, 'Plan', 'plan@example.com', 'x', 0)`);
    await db.sequelize.query(`INSERT INTO posts (post_uuid, user_id, post_title, post_body) SELECT gen_random_uuid(), 1, 'Post', 'Body' FROM generate_series(1, 10000)`);

    const plan = await withRawConnection(db.sequelize, async (connection) => {
      // The services' connections plan a prepared statement once (shared/db), as here.
      await connection.query({ text: `PREPARE create_batch AS ${createBatchSql('random', postIdempotencyClaims)}` });
      const [row] = await connection.query<{ 'QUERY PLAN': unknown }>({
        text: `EXPLAIN (FORMAT JSON) EXECUTE create_batch(
          ARRAY[gen_random_uuid()], ARRAY[1], ARRAY['Title'], ARRAY['Body'], ARRAY[NULL]::text[], ARRAY[NULL]::text[], 'post.created',
          ARRAY[11111, 22222, 33333, 44444], ARRAY[NULL]::text[], ARRAY[NULL]::text[])`,
      });
      return row['QUERY PLAN'];
    });

    // The INSERT itself is a ModifyTable on posts; every read of posts must be a probe.
    const reads = relationNodes(plan).filter((node) => node.relation === 'posts' && node.type !== 'ModifyTable');
    expect(reads.length).toBeGreaterThanOrEqual(4);
    expect(reads.map((node) => node.type).filter((type) => !/^Index (Only )?Scan$/.test(type))).toEqual([]);
  });
});
