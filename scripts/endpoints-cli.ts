import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { Config, loadConfig } from '../shared/config';
import { Database, createDatabase } from '../shared/db';
import { maskedUrl, shownUrl } from '../shared/http/url-display';
import {
  EndpointNotFoundError,
  InvalidEndpointError,
  OPERATOR,
  USERINFO_REFUSED,
  ReplayWindowError,
  UnknownEventTypeError,
  assertEndpointSecret,
  assertEndpointUrl,
  assertKnownEventTypes,
  createEndpoint,
  deleteEndpoint,
  endpointRulesOf,
  generateEndpointSecret,
  presentAuth,
  presentClientCertificate,
  presentHeaders,
  replayEndpoint,
  rotateEndpointSecret,
  updateEndpoint,
} from '../shared/operations';
import { createWebhookProducer } from '../shared/deliveries/webhook-producer';

const USAGE = `usage:
  npm run endpoints -- add --url URL [--events e1,e2] [--secret S] [--description D]
                            [--header 'Name: value' ...] [--ordering unordered|fifo] [--rate-limit N]
                            [--filter JSON] [--signature-scheme hmac-sha256|ed25519]
                            [--auth-token-url URL --auth-client-id ID --auth-client-secret S
                             [--auth-scope S] [--auth-audience A]] [--client-cert FILE --client-key FILE]
  npm run endpoints -- update --id ID [--header 'Name: value' ...] [--no-headers] [--ordering unordered|fifo]
                               [--rate-limit N|none] [--filter JSON|none]
                               [--auth-token-url URL --auth-client-id ID --auth-client-secret S|'********' ...] [--no-auth]
                               [--client-cert FILE [--client-key FILE]] [--no-client-certificate]
  npm run endpoints -- list
  npm run endpoints -- disable --id ID
  npm run endpoints -- enable --id ID
  npm run endpoints -- delete --id ID
  npm run endpoints -- rotate --id ID [--secret S] [--overlap-hours H]
  npm run endpoints -- replay --id ID --since ISO-8601`;

/** How long the previous secret keeps signing after a rotation unless --overlap-hours is given (Svix's window). */
const DEFAULT_OVERLAP_HOURS = 24;
/** Bound of --overlap-hours: a month is ample for any receiver to deploy its new secret. */
const MAX_OVERLAP_HOURS = 720;

/** A wrong command line; the message is printed with the usage and the exit code is 2. */
class UsageError extends Error {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, options);
    this.name = 'UsageError';
  }
}

/**
 * Manages webhook_endpoints (docs/design.md §9). Each command prints one JSON line per result on
 * stdout: `add` prints `{"id":..,"secret":".."}` (the secret is `whsec_` + base64 of 32
 * random bytes unless --secret is given; with `--signature-scheme ed25519` it is the endpoint's
 * `whpk_` public key, of a fresh pair or of the `whsk_` key given as --secret; --events must name event types of the catalog,
 * docs/design.md §11.1), `list` one line per endpoint without its secrets, `disable` `{"id":..,
 * "active":false}`, `enable` `{"id":..,"active":true}` (clears the disabled reason), `delete`
 * `{"id":..,"deleted":true}` (its pending deliveries end failed, as over the API), `rotate`
 * `{"id":..,"secret":"<new>","previous_secret_expires_at":"<ISO 8601>"}` (the old secret keeps
 * signing until then), `replay` `{"id":..,"count":N}` (the past events since `--since` the
 * endpoint would receive now and never got, queued oldest first; needs REDIS_URL). `--header` (repeatable) sets a static header sent with every delivery
 * `--ordering fifo` delivers in order, `--rate-limit N` caps attempts per second, `--filter`
 * (a JSON object) decides which events the endpoint gets (docs/design.md §14.1, §6.1); `update` replaces
 * the headers (`--no-headers` clears them), changes the ordering, the rate limit or the filter
 * (`none` removes either) and prints those fields, sensitive
 * header values masked as in `list`. `--auth-*` set OAuth2 client credentials (docs/design.md §14.4: the
 * worker gets a bearer token from `--auth-token-url`; `update` replaces them whole, and
 * `--auth-client-secret '********'` keeps the stored secret; `--no-auth` removes them);
 * `--client-cert` and `--client-key` name PEM files of a certificate the worker presents for
 * mutual TLS (`update` without `--client-key` keeps the stored key; `--no-client-certificate`
 * removes it). `list` and `update` show the client secret as `********` and the certificate as
 * `{subject, not_after}`, never its key. Endpoints made here are operator endpoints. `--help` prints the usage
 * on stdout. Errors go to stderr as `error: <message>`; a wrong command line (unknown event
 * names included; followed by the usage) exits with 2, any other failure with 1.
 */
async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  if (command === '--help' || command === '-h' || command === 'help') return print(USAGE);
  const { values } = parse(rest);
  if (command === 'add') return run((db, config) => add(db, config, values));
  if (command === 'list') return run(list);
  if (command === 'update') return run((db, config) => update(db, config, values));
  if (command === 'disable') return run((db) => disable(db, values));
  if (command === 'enable') return run((db) => enable(db, values));
  if (command === 'delete') return run((db) => remove(db, values));
  if (command === 'rotate') return rotate(values);
  if (command === 'replay') return replay(values);
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
        'overlap-hours': { type: 'string' },
        header: { type: 'string', multiple: true },
        'no-headers': { type: 'boolean' },
        ordering: { type: 'string' },
        'rate-limit': { type: 'string' },
        filter: { type: 'string' },
        since: { type: 'string' },
        'signature-scheme': { type: 'string' },
        'auth-token-url': { type: 'string' },
        'auth-client-id': { type: 'string' },
        'auth-client-secret': { type: 'string' },
        'auth-scope': { type: 'string' },
        'auth-audience': { type: 'string' },
        'no-auth': { type: 'boolean' },
        'client-cert': { type: 'string' },
        'client-key': { type: 'string' },
        'no-client-certificate': { type: 'boolean' },
      },
      strict: true,
      allowPositionals: false,
    });
  } catch (error) {
    throw new UsageError((error as Error).message, { cause: error });
  }
}

async function run(command: (db: Database, config: Config) => Promise<void>): Promise<void> {
  const config = loadConfig(process.env, 'cli');
  const db = createDatabase(config.databaseUrl, { poolMax: 1 });
  try {
    await command(db, config);
  } finally {
    await db.close();
  }
}

async function add(db: Database, config: Config, values: Values): Promise<void> {
  const url = requireOption(values.url, '--url');
  const auth = authOption(values);
  const clientCertificate = clientCertificateOption(values, false);
  const signatureScheme = schemeOption(values['signature-scheme']);
  // An ed25519 endpoint's key is checked (or made) by createEndpoint, with a message naming it.
  const given = signatureScheme === 'ed25519' ? values.secret : secretOption(values.secret);
  const events = (values.events ?? '')
    .split(',')
    .map((event) => event.trim())
    .filter((event) => event !== '');
  try {
    assertEndpointUrl(url);
    await assertKnownEventTypes(db, events);
  } catch (error) {
    if (error instanceof InvalidEndpointError) {
      throw new UsageError(error.message === USERINFO_REFUSED ? USERINFO_REFUSED : `--url must be an http or https URL: ${shownUrl(url)}`, { cause: error });
    }
    if (error instanceof UnknownEventTypeError) throw new UsageError(`--events: ${error.message}`, { cause: error });
    throw error;
  }
  const { endpoint, secret } = await usageErrorOnInvalid(() =>
    createEndpoint(
      db,
      {
        url,
        secret: given,
        signatureScheme,
        events,
        description: values.description ?? null,
        userId: null,
        headers: headersOption(values),
        ordering: orderingOption(values.ordering),
        rateLimitPerS: rateLimitOption(values['rate-limit']),
        filter: filterOption(values.filter),
        auth,
        clientCertificate,
      },
      endpointRulesOf(config),
    ),
  );
  print({ id: endpoint.id, secret });
}

async function update(db: Database, config: Config, values: Values): Promise<void> {
  const id = idOption(values.id);
  const headers = values['no-headers'] ? {} : values.header ? headersOption(values) : undefined;
  const ordering = orderingOption(values.ordering);
  const rateLimitPerS = rateLimitOption(values['rate-limit']);
  const filter = filterOption(values.filter);
  const auth = values['no-auth'] ? null : authOption(values);
  const clientCertificate = values['no-client-certificate'] ? null : clientCertificateOption(values, true);
  if ([headers, ordering, rateLimitPerS, filter, auth, clientCertificate].every((value) => value === undefined)) {
    throw new UsageError('update needs --header, --no-headers, --ordering, --rate-limit, --filter, --auth-*, --no-auth, --client-cert or --no-client-certificate.');
  }
  const changes = { headers, ordering, rateLimitPerS, filter, auth, clientCertificate };
  const endpoint = await notFoundAsError(id, () => usageErrorOnInvalid(() => updateEndpoint(db, id, OPERATOR, changes, undefined, endpointRulesOf(config))));
  const { ordering: order, rate_limit_per_s, auth: shownAuth, client_certificate } = endpoint;
  print({ id, headers: endpoint.headers, ordering: order, rate_limit_per_s, filter: endpoint.filter, auth: shownAuth, client_certificate });
}

/**
 * `--auth-token-url` with `--auth-client-id`, `--auth-client-secret` and the optional
 * `--auth-scope` and `--auth-audience`, as the API's `auth`; undefined without any. The rules
 * (docs/design.md §14.4) are the operations layer's.
 */
function authOption(values: Values): Record<string, string> | undefined {
  const given = (['auth-client-id', 'auth-client-secret', 'auth-scope', 'auth-audience'] as const).filter((name) => values[name] !== undefined);
  if (values['auth-token-url'] === undefined) {
    if (given.length > 0) throw new UsageError(`--${given[0]} needs --auth-token-url.`);
    return undefined;
  }
  return {
    type: 'oauth2_client_credentials',
    token_url: values['auth-token-url'],
    ...(values['auth-client-id'] !== undefined && { client_id: values['auth-client-id'] }),
    ...(values['auth-client-secret'] !== undefined && { client_secret: values['auth-client-secret'] }),
    ...(values['auth-scope'] !== undefined && { scope: values['auth-scope'] }),
    ...(values['auth-audience'] !== undefined && { audience: values['auth-audience'] }),
  };
}

/**
 * `--client-cert FILE` and `--client-key FILE` (PEM), read now; undefined without either. With
 * `keepKey` (update), a certificate without `--client-key` keeps the stored key.
 */
function clientCertificateOption(values: Values, keepKey: boolean): { cert: string; key: string } | undefined {
  const certFile = values['client-cert'];
  const keyFile = values['client-key'];
  if (certFile === undefined && keyFile === undefined) return undefined;
  if (certFile === undefined) throw new UsageError('--client-key needs --client-cert.');
  if (keyFile === undefined && !keepKey) throw new UsageError('--client-cert needs --client-key.');
  return { cert: pemFile(certFile, '--client-cert'), key: keyFile === undefined ? '********' : pemFile(keyFile, '--client-key') };
}

function pemFile(file: string, option: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    throw new UsageError(`${option}: cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`, { cause: error });
  }
}

/** `--header 'Name: value'`, repeatable, as a map; the rules of docs/design.md §14.1 are checked by the operations layer. */
function headersOption(values: Values): Record<string, string> | undefined {
  if (!values.header) return undefined;
  const headers: Record<string, string> = {};
  for (const line of values.header) {
    const colon = line.indexOf(':');
    if (colon <= 0) throw new UsageError(`--header must be "Name: value", got "${line}".`);
    headers[line.slice(0, colon).trim()] = line.slice(colon + 1).trim();
  }
  return headers;
}

/** `--filter '{"key": value}'` or `none`; its rules are the operations layer's. */
function filterOption(value: string | undefined): unknown {
  if (value === undefined) return undefined;
  if (value === 'none') return null;
  try {
    return JSON.parse(value);
  } catch (error) {
    throw new UsageError(`--filter must be a JSON object or none: ${(error as Error).message}`, { cause: error });
  }
}

/** `--rate-limit N` (1..10000 attempts a second) or `none`. */
function rateLimitOption(value: string | undefined): number | null | undefined {
  if (value === undefined) return undefined;
  if (value === 'none') return null;
  const limit = Number(value);
  if (!Number.isInteger(limit) || limit < 1 || limit > 10000) throw new UsageError(`--rate-limit must be 1..10000 or none, got "${value}".`);
  return limit;
}

function orderingOption(value: string | undefined): 'unordered' | 'fifo' | undefined {
  if (value === undefined || value === 'unordered' || value === 'fifo') return value;
  throw new UsageError(`--ordering must be unordered or fifo, got "${value}".`);
}

/** A value the operations layer refuses (a header, a replay's reach) is a wrong command line. */
async function usageErrorOnInvalid<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof InvalidEndpointError || error instanceof ReplayWindowError) throw new UsageError(error.message, { cause: error });
    throw error;
  }
}

async function list(db: Database): Promise<void> {
  const endpoints = await db.models.WebhookEndpoint.findAll({ where: { deletedAt: null }, order: [['id', 'ASC']] });
  for (const endpoint of endpoints) {
    print({
      id: endpoint.id,
      url: maskedUrl(endpoint.url),
      events: endpoint.events,
      active: endpoint.active,
      description: endpoint.description,
      headers: presentHeaders(endpoint.headers),
      ordering: endpoint.ordering,
      rateLimitPerS: endpoint.rateLimitPerS,
      filter: endpoint.filter,
      auth: presentAuth(endpoint.auth),
      clientCertificate: presentClientCertificate(endpoint.clientCert),
      disabledReason: endpoint.disabledReason,
      previousSecretExpiresAt: endpoint.previousSecretExpiresAt?.toISOString() ?? null,
    });
  }
}

async function disable(db: Database, values: Values): Promise<void> {
  const id = idOption(values.id);
  const [count] = await db.models.WebhookEndpoint.update(
    { active: false, disabledReason: 'disabled by an operator' },
    { where: { id, deletedAt: null } },
  );
  if (count === 0) throw new Error(`No endpoint has id ${id}.`);
  print({ id, active: false });
}

async function enable(db: Database, values: Values): Promise<void> {
  const id = idOption(values.id);
  await notFoundAsError(id, () => updateEndpoint(db, id, OPERATOR, { active: true }));
  print({ id, active: true });
}

async function remove(db: Database, values: Values): Promise<void> {
  const id = idOption(values.id);
  await notFoundAsError(id, () => deleteEndpoint(db, id, OPERATOR));
  print({ id, deleted: true });
}

/** Rotates the secret (shared/operations); the old one keeps signing for --overlap-hours (default 24). */
async function rotate(values: Values): Promise<void> {
  // Check the whole command line before connecting, so a typo never costs a connection.
  const id = idOption(values.id);
  // An ed25519 endpoint's whsk_ key is checked against the endpoint's scheme, after connecting.
  if (values.secret !== undefined && !values.secret.startsWith('whsk_')) secretOption(values.secret);
  const overlapHours = overlapOption(values['overlap-hours']);
  return run(async (db) => {
    const rotated = await notFoundAsError(id, () => usageErrorOnInvalid(() => rotateEndpointSecret(db, id, OPERATOR, { secret: values.secret, overlapHours })));
    print({ id, secret: rotated.secret, previous_secret_expires_at: rotated.previousSecretExpiresAt.toISOString() });
  });
}

/** Replays past events to the endpoint (docs/design.md §14.1), through the queue like the api. */
async function replay(values: Values): Promise<void> {
  const id = idOption(values.id);
  const raw = requireOption(values.since, '--since');
  const since = new Date(raw);
  if (!/^\d{4}-\d{2}-\d{2}T/.test(raw) || Number.isNaN(since.getTime())) throw new UsageError(`--since must be an ISO 8601 time, got "${raw}".`);
  const config = loadConfig(process.env, 'cli');
  const producer = createWebhookProducer(config);
  try {
    await producer.ready;
    const count = await notFoundAsError(id, () => usageErrorOnInvalid(() => replayEndpoint(producer, id, OPERATOR, since, config.webhookRetentionDays)));
    print({ id, count });
  } finally {
    await producer.close();
  }
}

async function notFoundAsError<T>(id: number, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof EndpointNotFoundError) throw new Error(`No endpoint has id ${id}.`, { cause: error });
    throw error;
  }
}

function idOption(value: string | undefined): number {
  const raw = requireOption(value, '--id');
  if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > 2 ** 31 - 1) {
    throw new UsageError(`--id must be a positive integer, got "${raw}".`);
  }
  return Number(raw);
}

/** The given secret, checked, or a fresh `whsec_` + base64 of 32 random bytes. */
function secretOption(value: string | undefined): string {
  const secret = value ?? generateEndpointSecret();
  try {
    // The worker signs with this secret; refuse one it could not use (whsec_ + bad base64).
    assertEndpointSecret(secret);
  } catch (error) {
    throw new UsageError('--secret must be whsec_ followed by base64, or any other non-empty string.', { cause: error });
  }
  return secret;
}

function schemeOption(value: string | undefined): 'hmac-sha256' | 'ed25519' | undefined {
  if (value === undefined || value === 'hmac-sha256' || value === 'ed25519') return value;
  throw new UsageError(`--signature-scheme must be hmac-sha256 or ed25519, got "${value}".`);
}

function overlapOption(value: string | undefined): number {
  if (value === undefined) return DEFAULT_OVERLAP_HOURS;
  const hours = /^\d+(\.\d+)?$/.test(value.trim()) ? Number(value) : NaN;
  if (!(hours <= MAX_OVERLAP_HOURS)) {
    throw new UsageError(`--overlap-hours must be a number of hours from 0 to ${MAX_OVERLAP_HOURS}, got "${value}".`);
  }
  return hours;
}

function requireOption(value: string | undefined, name: string): string {
  if (value === undefined || value.trim() === '') throw new UsageError(`${name} is required.`);
  return value;
}

function print(value: unknown): void {
  process.stdout.write(`${typeof value === 'string' ? value : JSON.stringify(value)}\n`);
}

main(process.argv.slice(2)).catch((error: unknown) => {
  const usage = error instanceof UsageError;
  process.stderr.write(`error: ${(error as Error).message}\n${usage ? `${USAGE}\n` : ''}`);
  process.exitCode = usage ? 2 : 1;
});
