'use strict';

/**
 * docs/design.md §14.1 `filter`: the matching rules as SQL functions, so the statements that write the
 * outbox rows (post events, fan-out, ad-hoc events) make no row for an endpoint whose filter
 * refuses the event's data, in the same statement. Every key of the filter must match; a key
 * missing from the data never matches; a scalar equals, type-strict (jsonb equality: 1 is not
 * "1"); an array in the filter is any-of; an object matches recursively; a data value that is
 * an array matches when one of its elements does.
 */
module.exports = {
  async up(queryInterface) {
    await queryInterface.sequelize.query(`
      CREATE FUNCTION webhook_filter_value_matches(f jsonb, d jsonb) RETURNS boolean
      LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
      BEGIN
        IF jsonb_typeof(f) = 'array' THEN
          RETURN EXISTS (SELECT 1 FROM jsonb_array_elements(f) AS choice(value) WHERE webhook_filter_value_matches(choice.value, d));
        END IF;
        IF jsonb_typeof(d) = 'array' THEN
          RETURN EXISTS (SELECT 1 FROM jsonb_array_elements(d) AS element(value) WHERE webhook_filter_value_matches(f, element.value));
        END IF;
        IF jsonb_typeof(f) = 'object' THEN
          RETURN jsonb_typeof(d) = 'object' AND webhook_filter_matches(f, d);
        END IF;
        RETURN f = d;
      END $$;

      CREATE FUNCTION webhook_filter_matches(filter jsonb, data jsonb) RETURNS boolean
      LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
      DECLARE
        entry record;
      BEGIN
        IF filter IS NULL THEN
          RETURN true;
        END IF;
        IF jsonb_typeof(data) IS DISTINCT FROM 'object' THEN
          RETURN false;
        END IF;
        FOR entry IN SELECT key, value FROM jsonb_each(filter) LOOP
          IF NOT (data ? entry.key) OR NOT webhook_filter_value_matches(entry.value, data -> entry.key) THEN
            RETURN false;
          END IF;
        END LOOP;
        RETURN true;
      END $$;
    `);
  },

  async down(queryInterface) {
    await queryInterface.sequelize.query(`
      DROP FUNCTION IF EXISTS webhook_filter_matches(jsonb, jsonb);
      DROP FUNCTION IF EXISTS webhook_filter_value_matches(jsonb, jsonb);
    `);
  },
};
