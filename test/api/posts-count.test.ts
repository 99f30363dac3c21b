import { QueryTypes } from 'sequelize';
import { createDatabase, Database } from '../../shared/db';
import { createMigrator } from '../../shared/db/migrate';
import { buildPost, createUser, TestUser } from '../support/factories';
import { ApiClient, ApiHarness, createApiHarness } from './support/api-harness';
import { countPosts } from './support/rows';

const COUNT_MIGRATION = '20261129000100-posts-count.js';

/** Layout B's `X-Total-Count` (docs/design.md §5) is kept per write in `posts_count`; it must equal count(*). */
describe('the posts count behind X-Total-Count', () => {
  let harness: ApiHarness;
  let a: ApiClient;
  let b: ApiClient;
  let alice: TestUser;
  // Writers of their own: each connection adds to its own shard.
  let writers: Database;

  beforeAll(async () => {
    harness = await createApiHarness();
    a = await harness.start('a');
    b = await harness.start('b');
    alice = await createUser(harness.db);
    writers = createDatabase(harness.env.databaseUrl, { poolMax: 8 });
  });

  afterAll(async () => {
    await writers.close();
    await harness.close();
  });

  const totalHeader = async () => {
    const res = await b.request({ url: '/api/v1/posts?limit=1', headers: alice.headers });
    expect(res.statusCode).toBe(200);
    return Number(res.headers['x-total-count']);
  };
  const createB = async () => Number((await b.request({ method: 'POST', url: '/api/v1/posts', headers: alice.headers, payload: buildPost() })).json().pid);
  const createA = async () => {
    const post = buildPost();
    const res = await a.request({ method: 'POST', url: '/api/v1/posts/create', headers: alice.headers, payload: { title: post.title, body: post.content, userId: alice.user.userId } });
    return Number(res.json().item.postId);
  };
  const deleteB = async (pid: number) => b.request({ method: 'DELETE', url: `/api/v1/posts/${pid}`, headers: alice.headers });

  it('when creates and deletes of both layouts and of other connections run concurrently, then X-Total-Count equals count(*)', async () => {
    const early = await Promise.all(Array.from({ length: 10 }, createB));
    await Promise.all([
      ...Array.from({ length: 30 }, createB),
      ...Array.from({ length: 30 }, createA),
      ...early.map(deleteB),
      ...Array.from({ length: 24 }, (_, n) =>
        writers.sequelize.query(
          n % 3 === 0
            ? `DELETE FROM posts WHERE pid = (SELECT pid FROM posts WHERE user_id = $1 ORDER BY pid LIMIT 1 FOR UPDATE SKIP LOCKED)`
            : `INSERT INTO posts (post_uuid, user_id, post_title, post_body) SELECT gen_random_uuid(), $1, 'direct', 'x' FROM generate_series(1, 3)`,
          { bind: [alice.user.userId] },
        ),
      ),
    ]);
    const rows = await countPosts(harness.db);
    expect(rows).toBeGreaterThan(60);
    expect(await totalHeader()).toBe(rows);
  });

  it("when a user with posts is deleted (a cascade) or the table is truncated, then the count follows", async () => {
    const bob = await createUser(harness.db);
    await Promise.all(Array.from({ length: 5 }, () => b.request({ method: 'POST', url: '/api/v1/posts', headers: bob.headers, payload: buildPost() })));
    const before = await countPosts(harness.db);
    await harness.db.sequelize.query('DELETE FROM users WHERE user_id = $1', { bind: [bob.user.userId] });
    expect(await countPosts(harness.db)).toBe(before - 5);
    expect(await totalHeader()).toBe(before - 5);

    await harness.db.sequelize.query('TRUNCATE posts');
    await createB();
    expect(await totalHeader()).toBe(1);
  });

  it('when migrated down and up on a table holding posts, then the count starts from the rows present and down drops it', async () => {
    const migrator = createMigrator(harness.db.sequelize);
    const countTable = async () =>
      (await harness.db.sequelize.query<{ name: string }>(`SELECT tablename AS name FROM pg_tables WHERE tablename = 'posts_count'`, { type: QueryTypes.SELECT })).length;
    await migrator.down({ to: COUNT_MIGRATION });
    expect(await countTable()).toBe(0);
    // Written while no count is kept: the migration must find them.
    await Promise.all(Array.from({ length: 7 }, createB));
    await migrator.up();
    expect(await countTable()).toBe(1);
    const rows = await countPosts(harness.db);
    expect(rows).toBeGreaterThanOrEqual(7);
    expect(await totalHeader()).toBe(rows);
    await createA();
    expect(await totalHeader()).toBe(rows + 1);
  });
});
