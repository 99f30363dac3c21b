import { Model, ModelStatic, QueryTypes } from 'sequelize';
import { createDatabase, Database } from '../../shared/db';
import { createTestEnvironment, TestEnvironment } from '../support/environment';

describe('database schema', () => {
  let env: TestEnvironment;
  let db: Database;

  beforeAll(async () => {
    env = await createTestEnvironment();
    db = createDatabase(env.databaseUrl);
  });

  afterAll(async () => {
    await db.close();
    await env.cleanup();
  });

  it.each(['User', 'Post', 'WebhookEndpoint', 'WebhookDelivery', 'WebhookAttempt', 'WebhookInbox', 'ServiceKey', 'WebhookEventType', 'IdempotencyKey', 'PortalLink', 'PortalSession'] as const)(
    'when the %s table is migrated, then every model attribute matches a real column and vice versa',
    async (name) => {
      const model = db.models[name] as ModelStatic<Model>;
      const columns = await db.sequelize.getQueryInterface().describeTable(model.getTableName());
      const attributes = Object.values(model.getAttributes());
      expect(attributes.map((attribute) => attribute.field).sort()).toEqual(Object.keys(columns).sort());
      for (const attribute of attributes) {
        const column = columns[attribute.field as string];
        expect({ field: attribute.field, nullable: column.allowNull }).toEqual({
          field: attribute.field,
          nullable: attribute.allowNull !== false && !attribute.primaryKey && !['created_at', 'updated_at'].includes(attribute.field as string),
        });
      }
    },
  );

  it('when a user id is outside 1..99999, then the CHECK refuses it', async () => {
    const insert = (id: number) =>
      db.sequelize.query(`INSERT INTO users (user_id, user_name, user_email) VALUES (${id}, 'x', 'u${id}@example.com')`);
    await expect(insert(100000)).rejects.toThrow(/users_user_id_range/);
    await expect(insert(0)).rejects.toThrow(/users_user_id_range/);
    await expect(insert(99999)).resolves.toBeDefined();
  });

  it('when Layout A inserts without a pid, then pids start at 100000', async () => {
    const user = await db.models.User.create({ userName: 'a', userEmail: 'seq@example.com', apiTokenHash: null });
    const post = await db.models.Post.create({
      postUuid: '6f1c1f0e-8f0c-4a59-9c9a-6c1b8d1f2a10',
      userId: user.userId,
      postTitle: 't',
      postBody: 'b',
      postImage: null,
    });
    expect(post.pid).toBeGreaterThanOrEqual(100000);
    const [row] = await db.sequelize.query<{ pid: number }>('SELECT pid FROM posts WHERE post_uuid = :uuid', {
      type: QueryTypes.SELECT,
      replacements: { uuid: post.postUuid },
    });
    expect(row.pid).toBe(post.pid);
  });

  it('when two databases are open in one process, then each one\'s models read and write their own', async () => {
    const other = await createTestEnvironment();
    const otherDb = createDatabase(other.databaseUrl);
    try {
      await otherDb.models.User.create({ userName: 'other', userEmail: 'other@example.com', apiTokenHash: null });
      expect(await otherDb.models.User.count({ where: { userEmail: 'other@example.com' } })).toBe(1);
      expect(await db.models.User.count({ where: { userEmail: 'other@example.com' } })).toBe(0);
    } finally {
      await otherDb.close();
      await other.cleanup();
    }
  });
});
