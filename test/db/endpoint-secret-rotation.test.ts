import { QueryTypes } from 'sequelize';
import { createDatabase, Database } from '../../shared/db';
import { createMigrator } from '../../shared/db/migrate';
import { createTestEnvironment, TestEnvironment } from '../support/environment';

const MIGRATION = '20261121000006-add-endpoint-secret-rotation.js';
const NEW_SECRET = 'whsec_bmV3LXJlY2VpdmVyLXNlY3JldC0wMTIzNDU2Nzg5';
const OLD_SECRET = 'whsec_b2xkLXJlY2VpdmVyLXNlY3JldC0wMTIzNDU2Nzg5';

describe('endpoint secret rotation: schema', () => {
  let env: TestEnvironment;
  let db: Database;

  beforeEach(async () => {
    env = await createTestEnvironment();
    db = createDatabase(env.databaseUrl, { poolMax: 2 });
  });

  afterEach(async () => {
    await db.close();
    await env.cleanup();
  });

  async function columns(): Promise<string[]> {
    return Object.keys(await db.sequelize.getQueryInterface().describeTable('webhook_endpoints'));
  }

  it('When the rotation migration is undone and redone, then its columns go and come back and the endpoints stay', async () => {
    const endpoint = await db.models.WebhookEndpoint.create({
      url: 'https://example.com/hooks',
      secret: NEW_SECRET,
      previousSecret: OLD_SECRET,
      previousSecretExpiresAt: new Date(Date.now() + 3_600_000),
      description: null,
    });
    const migrator = createMigrator(db.sequelize);

    await migrator.down({ to: MIGRATION });

    const afterDown = await columns();
    expect(afterDown).not.toContain('previous_secret');
    expect(afterDown).not.toContain('previous_secret_expires_at');
    expect(afterDown).toContain('secret');
    // Undoing to it also undoes every later migration; it is the first to come back.
    expect((await migrator.pending()).map((migration) => migration.name)[0]).toBe(MIGRATION);

    await migrator.up();

    expect(await columns()).toEqual(expect.arrayContaining(['previous_secret', 'previous_secret_expires_at']));
    expect(await migrator.pending()).toEqual([]);
    const [row] = await db.sequelize.query<Record<string, unknown>>(
      'SELECT url, secret, previous_secret, previous_secret_expires_at FROM webhook_endpoints WHERE id = $1',
      { bind: [endpoint.id], type: QueryTypes.SELECT },
    );
    expect(row).toEqual({ url: 'https://example.com/hooks', secret: NEW_SECRET, previous_secret: null, previous_secret_expires_at: null });
  });

  it('When a previous secret is written without its expiry, or the reverse, then the CHECK refuses it', async () => {
    const insert = (previous: string | null, expires: string | null) =>
      db.sequelize.query(
        `INSERT INTO webhook_endpoints (url, secret, previous_secret, previous_secret_expires_at) VALUES ('https://example.com', 's3cret-value', $1, $2)`,
        { bind: [previous, expires] },
      );

    await expect(insert(OLD_SECRET, null)).rejects.toThrow(/webhook_endpoints_previous_secret_pair/);
    await expect(insert(null, new Date().toISOString())).rejects.toThrow(/webhook_endpoints_previous_secret_pair/);
    await expect(insert(OLD_SECRET, new Date().toISOString())).resolves.toBeDefined();
  });

  it('When RECEIVER_SECRET lists two secrets, then the seeded receiver endpoint gets the first (the newest)', async () => {
    const saved = process.env.RECEIVER_SECRET;
    process.env.RECEIVER_SECRET = ` ${NEW_SECRET}\n ${OLD_SECRET} `;
    try {
      await createMigrator(db.sequelize, 'seeders').up();
    } finally {
      if (saved === undefined) delete process.env.RECEIVER_SECRET;
      else process.env.RECEIVER_SECRET = saved;
    }

    const endpoints = await db.models.WebhookEndpoint.findAll({ where: { description: 'receiver sink (seeded)' } });
    expect(endpoints.map((endpoint) => [endpoint.secret, endpoint.previousSecret])).toEqual([[NEW_SECRET, null]]);
  });
});
