#!/usr/bin/env node
// Creates the database named in DATABASE_URL when it does not exist, so that
// `npm run db:migrate` works on a fresh server. Plain JS: it runs before any build.
//
// PostgreSQL may still be starting (a container's first initialisation listens on its Unix
// socket only, then restarts): connection failures are retried for up to --wait-seconds
// (default 30), once a second; a refusal by the server itself (wrong password) is not.
const { Client } = require('pg');

const USAGE = 'usage: node scripts/create-database.js [--wait-seconds N]   (reads DATABASE_URL)';
const DEFAULT_WAIT_SECONDS = 30;
// SQLSTATEs of a server that is up but not accepting connections yet (57P03 cannot_connect_now).
const STARTING = new Set(['57P03']);

function waitSeconds(argv) {
  if (argv.length === 0) return DEFAULT_WAIT_SECONDS;
  if (argv.length === 2 && argv[0] === '--wait-seconds' && /^\d{1,4}$/.test(argv[1])) return Number(argv[1]);
  if (argv.includes('--help') || argv.includes('-h')) {
    console.log(USAGE);
    process.exit(0);
  }
  console.error(`error: unexpected arguments: ${argv.join(' ')}\n${USAGE}`);
  process.exit(2);
}

/** Whether a connection failure may heal by itself: the server is not there yet, or still starting. */
function transient(error) {
  if (STARTING.has(error.code)) return true;
  // A five-character SQLSTATE is the server's answer (no such role, bad password): final.
  if (typeof error.code === 'string' && /^(?=.*\d)[0-9A-Z]{5}$/.test(error.code)) return false;
  return true;
}

async function connect(url, boundSeconds, host) {
  const deadline = Date.now() + boundSeconds * 1000;
  let announced = false;
  for (;;) {
    const client = new Client({ connectionString: url, connectionTimeoutMillis: 3000 });
    try {
      await client.connect();
      return client;
    } catch (error) {
      await client.end().catch(() => undefined);
      if (!transient(error) || Date.now() >= deadline) {
        console.error(`error: cannot reach PostgreSQL at ${host} (${error.message}). Set DATABASE_URL.`);
        process.exit(1);
      }
      if (!announced) {
        console.error(`PostgreSQL at ${host} is not accepting connections yet (${error.message}); retrying for up to ${boundSeconds} s`);
        announced = true;
      }
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }
}

async function main() {
  const bound = waitSeconds(process.argv.slice(2));
  const target = new URL(process.env.DATABASE_URL || 'postgres://postgres:postgres@127.0.0.1:5432/posts');
  const name = decodeURIComponent(target.pathname.slice(1));
  if (!name) throw new Error('DATABASE_URL names no database');
  const admin = new URL(target);
  admin.pathname = '/postgres';
  const client = await connect(admin.toString(), bound, target.host);
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
  console.error(`error: ${error.message}`);
  process.exit(1);
});
