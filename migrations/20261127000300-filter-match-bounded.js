'use strict';

const previous = require('./20261124000300-endpoint-filter-function.js');

/**
 * docs/design.md §14.3 `filter`: matching never raises, whatever filter is stored (one
 * written by hand, or under older rules) and whatever the event's data, so no statement that
 * writes deliveries (a post change, a fan-out, a replay) fails because of one endpoint's
 * filter. A filter that is not an object matches nothing (a JSON null is no filter, as SQL
 * NULL is). Recursion is bounded: the filter's levels count objects and arrays alike, and a
 * container beyond the fifth level matches nothing, as does a sixth array nested in the data;
 * before, a deep array recursed once per level until PostgreSQL's stack limit failed the write.
 * The rules are otherwise those of the previous version: every key must match, a key missing
 * from the data never does, a scalar equals type-strict, an array in the filter is any-of, an
 * object matches recursively, a data array matches when one of its elements does.
 */
module.exports = {
  async up(queryInterface) {
    await queryInterface.sequelize.query(`
      DROP FUNCTION webhook_filter_value_matches(jsonb, jsonb);

      -- f matched against d; depth: the filter's levels around f; data_depth: the data arrays
      -- entered on the way to d.
      CREATE FUNCTION webhook_filter_value_matches(f jsonb, d jsonb, depth int, data_depth int) RETURNS boolean
      LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
      DECLARE
        entry record;
      BEGIN
        IF jsonb_typeof(f) IN ('object', 'array') AND depth >= 5 THEN
          RETURN false;
        END IF;
        IF jsonb_typeof(f) = 'array' THEN
          RETURN EXISTS (SELECT 1 FROM jsonb_array_elements(f) AS choice(value)
                          WHERE webhook_filter_value_matches(choice.value, d, depth + 1, data_depth));
        END IF;
        IF jsonb_typeof(d) = 'array' THEN
          IF data_depth >= 5 THEN
            RETURN false;
          END IF;
          RETURN EXISTS (SELECT 1 FROM jsonb_array_elements(d) AS element(value)
                          WHERE webhook_filter_value_matches(f, element.value, depth, data_depth + 1));
        END IF;
        IF jsonb_typeof(f) = 'object' THEN
          IF jsonb_typeof(d) IS DISTINCT FROM 'object' THEN
            RETURN false;
          END IF;
          FOR entry IN SELECT key, value FROM jsonb_each(f) LOOP
            IF NOT (d ? entry.key) OR NOT webhook_filter_value_matches(entry.value, d -> entry.key, depth + 1, data_depth) THEN
              RETURN false;
            END IF;
          END LOOP;
          RETURN true;
        END IF;
        RETURN f = d;
      END $$;

      CREATE OR REPLACE FUNCTION webhook_filter_matches(filter jsonb, data jsonb) RETURNS boolean
      LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
      BEGIN
        IF filter IS NULL OR jsonb_typeof(filter) = 'null' THEN
          RETURN true;
        END IF;
        IF jsonb_typeof(filter) <> 'object' OR jsonb_typeof(data) IS DISTINCT FROM 'object' THEN
          RETURN false;
        END IF;
        RETURN webhook_filter_value_matches(filter, data, 0, 0);
      END $$;
    `);
  },

  async down(queryInterface, Sequelize) {
    await queryInterface.sequelize.query('DROP FUNCTION webhook_filter_value_matches(jsonb, jsonb, int, int)');
    await previous.down(queryInterface, Sequelize);
    await previous.up(queryInterface, Sequelize);
  },
};
