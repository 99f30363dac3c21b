import { parseArgs } from 'node:util';
import { QueryTypes, UniqueConstraintError } from 'sequelize';
import { endPortalSessions } from '../shared/auth/portal-sessions';
import { generateApiToken, hashApiToken } from '../services/api/src/users/api-token';
import { Database } from '../shared/db';
import { CliIo, CommandError, DatabaseCommand, defaultIo, runAsMain, runDatabaseCli, UsageError } from './cli-support';

const USAGE = `usage:
  npm run users -- create --name NAME --email EMAIL [--quota N]   create a user and print {"user_id":..,"token":".."}
  npm run users -- token --user-id N                              issue a new token (the old one stops working)
  npm run users -- revoke --user-id N                             remove the user's token`;

/**
 * Manages API users and their bearer tokens (docs/design.md §4). Only the sha256 of a token is
 * stored; the token itself is printed once, in one JSON line on stdout.
 *
 * `--help` prints the usage on stdout.
 *
 * @param argv - the arguments after the script name, e.g. `['create', '--name', 'Ann', '--email', 'a@example.com']`
 * @returns the exit code: 0 done, 1 failed (e.g. unknown user, duplicate email, database down), 2 bad arguments
 */
export function runUsersCli(argv: string[], io: CliIo = defaultIo): Promise<number> {
  return runDatabaseCli({ usage: USAGE, commands: COMMANDS }, argv, io);
}

// The arguments are checked once connected: a database down is reported before a typo.
const COMMANDS: Record<string, DatabaseCommand> = {
  create: (args) => async (db) => {
    const { name, email, quota } = parse(args, { name: { type: 'string' }, email: { type: 'string' }, quota: { type: 'string' } });
    if (!name?.trim()) throw new UsageError('--name is required');
    if (!email || !/^[^\s@]+@[^\s@]+$/.test(email)) throw new UsageError('--email must be an email address');
    const quotaLimit = quota === undefined ? 0 : nonNegativeInteger('--quota', quota);
    const token = generateApiToken();
    // Ids given explicitly (seeds, user.created webhooks) can sit ahead of the sequence:
    // take the next free one. The sequence's MAXVALUE ends the loop with an error.
    for (;;) {
      try {
        const [row] = await db.sequelize.query<{ user_id: number }>(
          'INSERT INTO users (user_name, user_email, api_token_hash, quota_limit) VALUES ($1, $2, $3, $4) RETURNING user_id',
          { bind: [name.trim(), email, hashApiToken(token), quotaLimit], type: QueryTypes.SELECT },
        );
        return { lines: [{ user_id: row.user_id, token }] };
      } catch (err) {
        if (!(err instanceof UniqueConstraintError)) throw err;
        if ((err.parent as { constraint?: string }).constraint !== 'users_pkey') {
          throw new CommandError(`a user with email ${email} already exists`);
        }
      }
    }
  },

  token: (args) => async (db) => {
    const userId = userIdOption(args);
    const token = generateApiToken();
    await setTokenHash(db, userId, hashApiToken(token));
    return { lines: [{ user_id: userId, token }], change: { kind: 'user', userId } };
  },

  revoke: (args) => async (db) => {
    const userId = userIdOption(args);
    await setTokenHash(db, userId, null);
    return { lines: [{ user_id: userId, revoked: true }], change: { kind: 'user', userId } };
  },
};

function parse<T extends Record<string, { type: 'string' }>>(args: string[], options: T) {
  try {
    return parseArgs({ args, options, strict: true, allowPositionals: false }).values as { [K in keyof T]?: string };
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

function userIdOption(args: string[]): number {
  const { 'user-id': raw } = parse(args, { 'user-id': { type: 'string' } });
  if (raw === undefined) throw new UsageError('--user-id is required');
  const id = nonNegativeInteger('--user-id', raw);
  if (id < 1 || id > 99_999) throw new UsageError('--user-id must be between 1 and 99999');
  return id;
}

function nonNegativeInteger(option: string, raw: string): number {
  if (!/^\d{1,9}$/.test(raw)) throw new UsageError(`${option} must be a non-negative integer`);
  return Number(raw);
}

/**
 * Replaces (or with null removes) the user's token hash and, in the same transaction, ends
 * their portal sessions (docs/design.md §11.6): a session must not outlive the token.
 *
 * @throws CommandError when there is no such user
 */
async function setTokenHash(db: Database, userId: number, hash: string | null): Promise<void> {
  await db.sequelize.transaction(async (transaction) => {
    const rows = await db.sequelize.query('UPDATE users SET api_token_hash = $2, updated_at = now() WHERE user_id = $1 RETURNING user_id', {
      bind: [userId, hash],
      type: QueryTypes.SELECT,
      transaction,
    });
    if (rows.length === 0) throw new CommandError(`no user with id ${userId}`);
    await endPortalSessions(db.sequelize, userId, transaction);
  });
}

if (require.main === module) runAsMain(runUsersCli);
