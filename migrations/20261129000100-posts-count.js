'use strict';

/**
 * posts_count: the number of posts kept per write, so Layout B's exact `X-Total-Count`
 * (docs/design.md §5) is a sum of 16 rows instead of a scan of the table per page.
 *
 * Statement-level triggers with transition tables add each INSERT's and DELETE's row count
 * (a user's cascade included) in the writing transaction, so a reader's snapshot sees the
 * posts and their count together. Each connection adds to the shard of its backend pid:
 * concurrent creates of different connections wait on different rows, not on one. A
 * statement that changed no row (a create whose pids all collided) locks nothing. TRUNCATE
 * holds the table exclusively, so zeroing every shard in it is exact.
 *
 * `up` seeds shard 0 from the rows present while holding off writers (SHARE lock), so a
 * table migrated under load starts exact; `down` drops the triggers, functions and table.
 */
const SHARDS = 16;

module.exports = {
  async up(queryInterface) {
    await queryInterface.sequelize.transaction(async (transaction) => {
      await queryInterface.sequelize.query(
        `
        LOCK TABLE posts IN SHARE MODE;
        CREATE TABLE posts_count (
          shard SMALLINT PRIMARY KEY CHECK (shard >= 0 AND shard < ${SHARDS}),
          n     BIGINT NOT NULL
        );
        INSERT INTO posts_count (shard, n)
        SELECT s, CASE WHEN s = 0 THEN (SELECT count(*) FROM posts) ELSE 0 END FROM generate_series(0, ${SHARDS - 1}) AS s;

        CREATE FUNCTION posts_count_add() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
          delta bigint;
        BEGIN
          IF TG_OP = 'INSERT' THEN
            SELECT count(*) INTO delta FROM posts_inserted;
          ELSE
            SELECT -count(*) INTO delta FROM posts_deleted;
          END IF;
          IF delta <> 0 THEN
            UPDATE posts_count SET n = n + delta WHERE shard = pg_backend_pid() % ${SHARDS};
          END IF;
          RETURN NULL;
        END $$;
        CREATE TRIGGER posts_count_insert AFTER INSERT ON posts
          REFERENCING NEW TABLE AS posts_inserted FOR EACH STATEMENT EXECUTE FUNCTION posts_count_add();
        CREATE TRIGGER posts_count_delete AFTER DELETE ON posts
          REFERENCING OLD TABLE AS posts_deleted FOR EACH STATEMENT EXECUTE FUNCTION posts_count_add();

        CREATE FUNCTION posts_count_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          UPDATE posts_count SET n = 0;
          RETURN NULL;
        END $$;
        CREATE TRIGGER posts_count_truncate AFTER TRUNCATE ON posts FOR EACH STATEMENT EXECUTE FUNCTION posts_count_truncate();
        `,
        { transaction },
      );
    });
  },

  async down(queryInterface) {
    await queryInterface.sequelize.query(`
      DROP TRIGGER IF EXISTS posts_count_insert ON posts;
      DROP TRIGGER IF EXISTS posts_count_delete ON posts;
      DROP TRIGGER IF EXISTS posts_count_truncate ON posts;
      DROP FUNCTION IF EXISTS posts_count_add();
      DROP FUNCTION IF EXISTS posts_count_truncate();
      DROP TABLE IF EXISTS posts_count;
    `);
  },
};
