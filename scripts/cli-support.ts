import { announceCredentialChange, CredentialChange } from '../shared/auth/credential-changes';
import { Config, ConfigError, loadConfig } from '../shared/config';
import { createDatabase, Database } from '../shared/db';

/** A mistake in the command line: printed with the usage, exit code 2. */
export class UsageError extends Error {}
/** The command could not be carried out: printed alone, exit code 1. */
export class CommandError extends Error {}

/** Where a CLI reads its environment and writes its lines (without the trailing newline). */
export interface CliIo {
  env: NodeJS.ProcessEnv;
  stdout(line: string): void;
  stderr(line: string): void;
}

/** The process's environment and streams, one `\n` after each line. */
export const defaultIo: CliIo = {
  env: process.env,
  stdout: (line) => process.stdout.write(line + '\n'),
  stderr: (line) => process.stderr.write(line + '\n'),
};

/** What a command prints (one JSON line each), and the credential change running api processes must hear of. */
export interface CommandResult {
  lines: object[];
  change?: CredentialChange;
}

/**
 * One command: given the arguments after its name (and the environment, for a command that
 * needs another service's view of it) it may check them at once (throwing UsageError, before
 * any connection is made), then returns the work to do on the database.
 */
export type DatabaseCommand = (args: string[], env: NodeJS.ProcessEnv) => (db: Database) => Promise<CommandResult>;

/**
 * Runs `<command> [args]` for a CLI working on PostgreSQL: `--help`, `-h` or `help` prints
 * `usage` on stdout; otherwise the command's arguments are checked, the config loaded
 * (`loadConfig(io.env, 'cli')`), the database opened (pool of 1) and pinged, the work done,
 * each result line printed as JSON on stdout, the credential change (if any) announced, and
 * the database closed.
 *
 * Errors go to stderr as `error: <message>`. Any other error is rethrown.
 *
 * @returns the exit code: 0 done, 1 CommandError or ConfigError (PostgreSQL unreachable is a
 *   CommandError naming DATABASE_URL), 2 UsageError (the message followed by `usage`)
 */
export async function runDatabaseCli(
  cli: { usage: string; commands: Record<string, DatabaseCommand> },
  argv: string[],
  io: CliIo,
): Promise<number> {
  try {
    const [command, ...rest] = argv;
    if (command === '--help' || command === '-h' || command === 'help') {
      io.stdout(cli.usage);
      return 0;
    }
    // Own commands only: `toString` and friends are inherited by every object, not commands.
    const prepare = command !== undefined && Object.hasOwn(cli.commands, command) ? cli.commands[command] : undefined;
    if (!prepare) throw new UsageError(command ? `unknown command "${command}"` : 'missing command');
    const work = prepare(rest, io.env);
    const config = loadConfig(io.env, 'cli');
    const db = createDatabase(config.databaseUrl, { poolMax: 1 });
    try {
      await db.ping().catch((err: Error) => {
        throw new CommandError(`cannot reach PostgreSQL (DATABASE_URL): ${err.message}`);
      });
      const { lines, change } = await work(db);
      for (const line of lines) io.stdout(JSON.stringify(line));
      if (change) await announce(config, change, io);
    } finally {
      await db.close();
    }
    return 0;
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr(`error: ${err.message}\n${cli.usage}`);
      return 2;
    }
    if (err instanceof CommandError || err instanceof ConfigError) {
      io.stderr(`error: ${err.message}`);
      return 1;
    }
    throw err;
  }
}

/**
 * Tells running api processes to drop what they cached about the credential (docs/design.md §4). The
 * change is already committed; should Redis be away, processes whose subscription is down read
 * PostgreSQL anyway, and cached entries expire within a minute, which the warning says.
 */
async function announce(config: Config, change: CredentialChange, io: CliIo): Promise<void> {
  try {
    await announceCredentialChange(config, config.redisPrefix, change);
  } catch (err) {
    io.stderr(`warning: saved, but running api processes could not be told (Redis: ${(err as Error).message}); they stop accepting the old credential within 60 s`);
  }
}

/** Runs a CLI as the process's main module: exits with its code, or 1 after `error: <message>` should it throw. */
export function runAsMain(cli: (argv: string[]) => Promise<number>): void {
  cli(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err) => {
      process.stderr.write(`error: ${(err as Error).message}\n`);
      process.exit(1);
    },
  );
}
