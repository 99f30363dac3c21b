'use strict';

const { createHash, randomBytes } = require('node:crypto');

/**
 * Credentials by environment (docs/design.md §4, "Seeding").
 *
 * Outside production (NODE_ENV not `production`), or with SEED_DEMO=true: the development
 * service key `sk_dev_local_only_do_not_deploy_0123456789abcdefg` with scope `*` (users 1 and
 * 2 come from the dev-users seeder). Public values, for local use only.
 *
 * In production: no known credential. When `users` is empty, user 1 and one `*` service key
 * are created with random secrets (32 random bytes each) and printed once on stdout, one JSON
 * line each: `{"kind":"user","user_id":1,"token":".."}` and
 * `{"kind":"service_key","id":N,"key":"sk_..","scopes":["*"]}`. Only their sha256 is stored,
 * so the lines cannot be printed again; a second seed finds users and creates nothing.
 */
const DEV_SERVICE_KEY = 'sk_dev_local_only_do_not_deploy_0123456789abcdefg';

const sha256 = (value) => createHash('sha256').update(value, 'utf8').digest('hex');
const demoCredentials = () => process.env.NODE_ENV !== 'production' || /^\s*true\s*$/i.test(process.env.SEED_DEMO || '');

module.exports = {
  async up(queryInterface) {
    const { sequelize } = queryInterface;
    if (demoCredentials()) {
      await sequelize.query(
        `INSERT INTO service_keys (name, key_hash, scopes) VALUES ('development key (seeded)', :hash, ARRAY['*'])
         ON CONFLICT (key_hash) DO NOTHING`,
        { replacements: { hash: sha256(DEV_SERVICE_KEY) } },
      );
      return;
    }
    const token = randomBytes(32).toString('base64url');
    const key = `sk_${randomBytes(32).toString('base64url')}`;
    const created = await sequelize.transaction(async (transaction) => {
      // Two seeds at once must not both create: the second waits here, then finds user 1.
      await sequelize.query('LOCK TABLE users IN SHARE ROW EXCLUSIVE MODE', { transaction });
      const [[{ count }]] = await sequelize.query('SELECT count(*)::int AS count FROM users', { transaction });
      if (count > 0) return null;
      await sequelize.query(
        `INSERT INTO users (user_id, user_name, user_email, api_token_hash, quota_limit)
         VALUES (1, 'Administrator', 'admin@localhost.invalid', :hash, 0);
         SELECT setval('users_user_id_seq', 1)`,
        { replacements: { hash: sha256(token) }, transaction },
      );
      const [[row]] = await sequelize.query(
        `INSERT INTO service_keys (name, key_hash, scopes) VALUES ('first operator key (seeded)', :hash, ARRAY['*']) RETURNING id`,
        { replacements: { hash: sha256(key) }, transaction },
      );
      return { keyId: row.id };
    });
    if (!created) return;
    process.stdout.write(`${JSON.stringify({ kind: 'user', user_id: 1, token })}\n`);
    process.stdout.write(`${JSON.stringify({ kind: 'service_key', id: created.keyId, key, scopes: ['*'] })}\n`);
  },

  async down(queryInterface) {
    await queryInterface.sequelize.query('DELETE FROM service_keys WHERE key_hash = :hash', { replacements: { hash: sha256(DEV_SERVICE_KEY) } });
  },
};
