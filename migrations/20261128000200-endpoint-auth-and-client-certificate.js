'use strict';

/**
 * How the sender proves itself to an endpoint beyond static headers (docs/design.md §14.4):
 * - auth: null, or `{"type": "oauth2_client_credentials", token_url, client_id,
 *   client_secret, scope?, audience?}`; the api checks its shape and masks the secret on read.
 * - client_cert, client_key: the PEM certificate and private key the worker presents for
 *   mutual TLS to the endpoint's own origin; both set or both null. The key, like `secret`,
 *   is kept as given (the api never shows it).
 */
module.exports = {
  async up(queryInterface) {
    await queryInterface.sequelize.query(`
      ALTER TABLE webhook_endpoints
        ADD COLUMN auth JSONB
          CONSTRAINT webhook_endpoints_auth_object CHECK (auth IS NULL OR jsonb_typeof(auth) = 'object'),
        ADD COLUMN client_cert TEXT,
        ADD COLUMN client_key TEXT,
        ADD CONSTRAINT webhook_endpoints_client_certificate_pair CHECK ((client_cert IS NULL) = (client_key IS NULL));
    `);
  },

  async down(queryInterface) {
    await queryInterface.sequelize.query(`
      ALTER TABLE webhook_endpoints
        DROP CONSTRAINT IF EXISTS webhook_endpoints_client_certificate_pair,
        DROP COLUMN IF EXISTS client_key,
        DROP COLUMN IF EXISTS client_cert,
        DROP COLUMN IF EXISTS auth;
    `);
  },
};
