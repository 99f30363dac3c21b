'use strict';

/**
 * posts: docs/design.md §3.1. Layout A's pids come from a sequence starting at 100000;
 * Layout B draws random pids in 10000..99999, so the two never collide.
 */
module.exports = {
  async up(queryInterface) {
    await queryInterface.sequelize.query(`
      CREATE SEQUENCE posts_pid_seq START WITH 100000 MINVALUE 100000;
      CREATE TABLE posts (
        pid        INTEGER PRIMARY KEY DEFAULT nextval('posts_pid_seq'),
        post_uuid  UUID NOT NULL CONSTRAINT posts_post_uuid_key UNIQUE,
        user_id    INTEGER NOT NULL REFERENCES users (user_id) ON UPDATE CASCADE ON DELETE CASCADE,
        post_title VARCHAR(255) NOT NULL,
        post_image VARCHAR(255),
        post_body  TEXT NOT NULL,
        created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
      );
      ALTER SEQUENCE posts_pid_seq OWNED BY posts.pid;
      CREATE INDEX posts_user_id_idx ON posts (user_id);
      CREATE INDEX posts_created_at_idx ON posts (created_at DESC, pid DESC);
    `);
  },

  async down(queryInterface) {
    await queryInterface.sequelize.query('DROP TABLE IF EXISTS posts');
  },
};
