import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { loadConfig } from '../shared/config';
import { Database, createDatabase } from '../shared/db';
import { signStandard } from '../shared/webhook/signing';

const USAGE = `Usage:
  npm run endpoints -- add --url URL [--events e1,e2] [--secret S] [--description D]
  npm run endpoints -- list
  npm run endpoints -- disable --id ID`;

/** A wrong command line; the message is printed with the usage and the exit code is 2. */
class UsageError extends Error {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, options);
    this.name = 'UsageError';
  }
}

/**
 * Manages webhook_endpoints (DESIGN §9). Each command prints one JSON line per result on
 * stdout: `add` prints `{"id":..,"secret":".."}` (the secret is `whsec_` + base64 of 32
 * random bytes unless --secret is given), `list` one line per endpoint without its secret,
 * `disable` `{"id":..,"active":false}`. Errors go to stderr with a non-zero exit code.
 */
async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  const { values } = parse(rest);
  if (command === 'add') return run((db) => add(db, values));
  if (command === 'list') return run(list);
  if (command === 'disable') return run((db) => disable(db, values));
  throw new UsageError(command ? `Unknown command "${command}".` : 'A command is required.');
}

type Values = ReturnType<typeof parse>['values'];

function parse(args: string[]) {
  try {
    return parseArgs({
      args,
      options: {
        url: { type: 'string' },
        events: { type: 'string' },
        secret: { type: 'string' },
        description: { type: 'string' },
        id: { type: 'string' },
      },
      strict: true,
      allowPositionals: false,
    });
  } catch (error) {
    throw new UsageError((error as Error).message, { cause: error });
  }
}

async function run(command: (db: Database) => Promise<void>): Promise<void> {
  const config = loadConfig(process.env, 'cli');
  const db = createDatabase(config.databaseUrl, { poolMax: 1 });
  try {
    await command(db);
  } finally {
    await db.close();
  }
}

async function add(db: Database, values: Values): Promise<void> {
  const url = requireOption(values.url, '--url');
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch (error) {
    throw new UsageError(`--url is not a valid URL: ${url}`, { cause: error });
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new UsageError('--url must be http or https.');
  const events = (values.events ?? '')
    .split(',')
    .map((event) => event.trim())
    .filter((event) => event !== '');
  const secret = values.secret ?? `whsec_${randomBytes(32).toString('base64')}`;
  try {
    // The worker signs with this secret; refuse one it could not use (whsec_ + bad base64).
    signStandard('check', 0, '', secret);
  } catch (error) {
    throw new UsageError('--secret must be whsec_ followed by base64, or any other non-empty string.', { cause: error });
  }
  const endpoint = await db.models.WebhookEndpoint.create({ url, secret, events, description: values.description ?? null });
  print({ id: endpoint.id, secret });
}

async function list(db: Database): Promise<void> {
  const endpoints = await db.models.WebhookEndpoint.findAll({ order: [['id', 'ASC']] });
  for (const endpoint of endpoints) {
    print({
      id: endpoint.id,
      url: endpoint.url,
      events: endpoint.events,
      active: endpoint.active,
      description: endpoint.description,
      disabledReason: endpoint.disabledReason,
    });
  }
}

async function disable(db: Database, values: Values): Promise<void> {
  const raw = requireOption(values.id, '--id');
  if (!/^\d+$/.test(raw)) throw new UsageError(`--id must be a positive integer, got "${raw}".`);
  const id = Number(raw);
  const [count] = await db.models.WebhookEndpoint.update(
    { active: false, disabledReason: 'disabled by an operator' },
    { where: { id } },
  );
  if (count === 0) throw new Error(`No endpoint has id ${id}.`);
  print({ id, active: false });
}

function requireOption(value: string | undefined, name: string): string {
  if (value === undefined || value.trim() === '') throw new UsageError(`${name} is required.`);
  return value;
}

function print(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value)}\n`);
}

main(process.argv.slice(2)).catch((error: unknown) => {
  const usage = error instanceof UsageError;
  process.stderr.write(`error: ${(error as Error).message}\n${usage ? `${USAGE}\n` : ''}`);
  process.exitCode = usage ? 2 : 1;
});
