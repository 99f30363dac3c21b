import { QueryTypes } from 'sequelize';
import { createDatabase, Database } from '../../shared/db';
import { eventEnvelope } from '../../shared/deliveries/event-data';
import { eventEnvelopeSql, isoJsonSql, jsonObjectSql, jsonTextSql } from '../../shared/deliveries/envelope-sql';
import { TestEnvironment, createTestEnvironment } from '../support/environment';

describe('the envelope written by PostgreSQL', () => {
  let env: TestEnvironment;
  let db: Database;

  beforeAll(async () => {
    env = await createTestEnvironment();
    db = createDatabase(env.config.databaseUrl, { poolMax: 1 });
  });

  afterAll(async () => {
    await db.close();
    await env.cleanup();
  });

  /** Every character PostgreSQL text can hold that JSON or encodeJson treats apart, and some that neither does. */
  const awkward = [
    ...Array.from({ length: 0x20 }, (_, code) => String.fromCharCode(code)).filter((char) => char !== '\u0000'),
    '"', '\\', '/', '\u007f', '\u0080', '\u00e9', '\u2028', '\u2029', '\ufeff', '\uffff', '😀', '日本語', "'", '</script>', '$1',
  ].join('');

  it('When a row of awkward text, numbers, nulls and times is written as an envelope in SQL, then it holds the bytes eventEnvelope writes for the same values', async () => {
    const at = new Date('2026-11-30T23:59:59.123Z');
    const sql = eventEnvelopeSql(
      '$1::text',
      jsonObjectSql([
        ['pid', '$2::int::text'],
        ['title', jsonTextSql('$3::text')],
        ['image', jsonTextSql('NULL::text')],
        ['at', isoJsonSql('$4::timestamptz')],
        ["it's \"odd\"", jsonTextSql('$3::text')],
      ]),
    );
    const [row] = await db.sequelize.query<{ body: string }>(`SELECT ${sql} AS body`, { bind: ['order.päid "x"', 123456, awkward, at], type: QueryTypes.SELECT });

    expect(row.body).toBe(eventEnvelope('order.päid "x"', { pid: 123456, title: awkward, image: null, at: at.toISOString(), "it's \"odd\"": awkward }));
  });
});
