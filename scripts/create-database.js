#!/usr/bin/env node
// Creates the database named in DATABASE_URL when it does not exist, so that
// `npm run db:migrate` works on a fresh server. Plain JS: it runs before any build.
const { Client } = require('pg');

async function main() {
  const target = new URL(process.env.DATABASE_URL || 'postgres://postgres:postgres@127.0.0.1:5432/posts');
  const name = decodeURIComponent(target.pathname.slice(1));
  if (!name) throw new Error('DATABASE_URL names no database');
  const admin = new URL(target);
  admin.pathname = '/postgres';
  const client = new Client({ connectionString: admin.toString() });
  try {
    await client.connect();
  } catch (error) {
    console.error(`Cannot reach PostgreSQL at ${target.host} (${error.message}). Set DATABASE_URL.`);
    process.exit(1);
  }
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (rowCount === 0) {
      await client.query(`CREATE DATABASE "${name.replace(/"/g, '""')}"`);
      console.log(`created database ${name}`);
    }
  } finally {
    await client.end();
  }
}

main().catch((error) => {
  console.error(error.message);
  process.exit(1);
});
