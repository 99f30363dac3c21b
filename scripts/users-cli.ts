import { parseArgs } from 'node:util';
import { QueryTypes, UniqueConstraintError } from 'sequelize';
import { generateApiToken, hashApiToken } from '../services/api/src/users/api-token';
import { announceCredentialChange, CredentialChange } from '../shared/auth/credential-changes';
import { Config, ConfigError, loadConfig } from '../shared/config';
import { createDatabase, Database } from '../shared/db';

const USAGE = `usage:
  npm run users -- create --name NAME --email EMAIL [--quota N]   create a user and print {"user_id":..,"token":".."}
  npm run users -- token --user-id N                              issue a new token (the old one stops working)
  npm run users -- revoke --user-id N                             remove the user's token`;

/** A mistake in the command line: printed with the usage, exit code 2. */
class UsageError extends Error {}
/** The command could not be carried out: printed alone, exit code 1. */
class CommandError extends Error {}

export interface CliIo {
  env: NodeJS.ProcessEnv;
  stdout(line: string): void;
  stderr(line: string): void;
}

const defaultIo: CliIo = {
  env: process.env,
  stdout: (line) => process.stdout.write(line + '\n'),
  stderr: (line) => process.stderr.write(line + '\n'),
};

/**
 * Manages API users and their bearer tokens (DESIGN §4). Only the sha256 of a token is
 * stored; the token itself is printed once, in one JSON line on stdout.
 *
 * `--help` prints the usage on stdout.
 *
 * @param argv - the arguments after the script name, e.g. `['create', '--name', 'Ann', '--email', 'a@example.com']`
 * @returns the exit code: 0 done, 1 failed (e.g. unknown user, duplicate email, database down), 2 bad arguments
 */
export async function runUsersCli(argv: string[], io: CliIo = defaultIo): Promise<number> {
  try {
    const [command, ...rest] = argv;
    if (command === '--help' || command === '-h' || command === 'help') {
      io.stdout(USAGE);
      return 0;
    }
    const action = COMMANDS[command ?? ''];
    if (!action) throw new UsageError(command ? `unknown command "${command}"` : 'missing command');
    const config = loadConfig(io.env, 'cli');
    const db = createDatabase(config.databaseUrl, { poolMax: 1 });
    try {
      await db.ping().catch((err: Error) => {
        throw new CommandError(`cannot reach PostgreSQL (DATABASE_URL): ${err.message}`);
      });
      const { line, change } = await action(db, rest);
      io.stdout(JSON.stringify(line));
      if (change) await announce(config, change, io);
    } finally {
      await db.close();
    }
    return 0;
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr(`error: ${err.message}\n${USAGE}`);
      return 2;
    }
    if (err instanceof CommandError || err instanceof ConfigError) {
      io.stderr(`error: ${err.message}`);
      return 1;
    }
    throw err;
  }
}

/** What a command prints, and the credential change running api processes must hear of. */
type Command = (db: Database, args: string[]) => Promise<{ line: object; change?: CredentialChange }>;

const COMMANDS: Record<string, Command> = {
  async create(db, args) {
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
        return { line: { user_id: row.user_id, token } };
      } catch (err) {
        if (!(err instanceof UniqueConstraintError)) throw err;
        if ((err.parent as { constraint?: string }).constraint !== 'users_pkey') {
          throw new CommandError(`a user with email ${email} already exists`);
        }
      }
    }
  },

  async token(db, args) {
    const userId = userIdOption(args);
    const token = generateApiToken();
    await setTokenHash(db, userId, hashApiToken(token));
    return { line: { user_id: userId, token }, change: { kind: 'user', userId } };
  },

  async revoke(db, args) {
    const userId = userIdOption(args);
    await setTokenHash(db, userId, null);
    return { line: { user_id: userId, revoked: true }, change: { kind: 'user', userId } };
  },
};

/**
 * Tells running api processes to drop what they cached about the user (DESIGN §4). The change
 * is already committed; should Redis be away, processes whose subscription is down read
 * PostgreSQL anyway, and cached entries expire within a minute, which the warning says.
 */
async function announce(config: Config, change: CredentialChange, io: CliIo): Promise<void> {
  try {
    await announceCredentialChange(config, config.redisPrefix, change);
  } catch (err) {
    io.stderr(`warning: saved, but running api processes could not be told (Redis: ${(err as Error).message}); they stop accepting the old credential within 60 s`);
  }
}

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

async function setTokenHash(db: Database, userId: number, hash: string | null): Promise<void> {
  const rows = await db.sequelize.query('UPDATE users SET api_token_hash = $2, updated_at = now() WHERE user_id = $1 RETURNING user_id', {
    bind: [userId, hash],
    type: QueryTypes.SELECT,
  });
  if (rows.length === 0) throw new CommandError(`no user with id ${userId}`);
}

if (require.main === module) {
  runUsersCli(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err) => {
      process.stderr.write(`error: ${(err as Error).message}\n`);
      process.exit(1);
    },
  );
}
