import { parseArgs } from 'node:util';
import { QueryTypes } from 'sequelize';
import { PortalUserNotFoundError } from '../services/api/src/portal/errors';
import { createPortalLink, PORTAL_LINK_LIMITS } from '../services/api/src/portal/portal-links';
import { hashApiToken } from '../services/api/src/users/api-token';
import { InvalidScopesError } from '../services/api/src/users/errors';
import { generateServiceKey, GRANTABLE_SCOPES, parseScopes } from '../services/api/src/users/service-key';
import { loadConfig } from '../shared/config';
import { CliIo, CommandError, DatabaseCommand, defaultIo, runAsMain, runDatabaseCli, UsageError } from './cli-support';

const USAGE = `usage:
  npm run keys -- create --name NAME --scopes S1,S2   create a service key and print {"id":..,"key":"sk_..","scopes":[..]}
  npm run keys -- list                                one JSON line per key (never the key itself)
  npm run keys -- revoke --id ID                      the key stops working at once
  npm run keys -- portal-link --user-id N [--scope manage|read] [--ttl-s S] [--session-ttl-s S]
                                                      a one-time link into the dashboard for that user;
                                                      prints {"id":..,"url":"<APP_URL>/portal#token=..","expires_at":".."}
scopes: ${GRANTABLE_SCOPES.join(', ')} (* = all)`;

/**
 * Manages service keys (docs/design.md §4): credentials of other services and operators, sent as
 * `Authorization: Bearer sk_...`. Only the sha256 of a key is stored; the key itself is
 * printed once by `create`. `portal-link` mints a portal link (docs/design.md §11.6) as
 * `POST /api/v1/portal-links` does, under the api's APP_URL (read as the api reads it).
 * Output is JSON lines on stdout; `--help` prints the usage.
 *
 * @param argv - the arguments after the script name, e.g. `['create', '--name', 'billing', '--scopes', 'webhooks:send']`
 * @returns the exit code: 0 done, 1 failed (e.g. unknown key, database down), 2 bad arguments
 */
export function runKeysCli(argv: string[], io: CliIo = defaultIo): Promise<number> {
  return runDatabaseCli({ usage: USAGE, commands: COMMANDS }, argv, io);
}

// Each command checks its arguments at once, so a typo never costs a connection.
const COMMANDS: Record<string, DatabaseCommand> = {
  create(args) {
    const { name, scopes: rawScopes } = parse(args, { name: { type: 'string' }, scopes: { type: 'string' } });
    if (!name?.trim()) throw new UsageError('--name is required');
    if (rawScopes === undefined) throw new UsageError('--scopes is required');
    let scopes: string[];
    try {
      scopes = parseScopes(rawScopes);
    } catch (err) {
      if (err instanceof InvalidScopesError) throw new UsageError(`--scopes: ${err.message}`);
      throw err;
    }
    return async (db) => {
      const key = generateServiceKey();
      const [row] = await db.sequelize.query<{ id: number }>(
        'INSERT INTO service_keys (name, key_hash, scopes) VALUES ($1, $2, $3) RETURNING id',
        { bind: [name.trim(), hashApiToken(key), scopes], type: QueryTypes.SELECT },
      );
      return { lines: [{ id: row.id, key, scopes }] };
    };
  },

  list(args) {
    parse(args, {});
    return async (db) => {
      const rows = await db.sequelize.query<{ id: number; name: string; scopes: string[]; revoked_at: Date | null; last_used_at: Date | null; created_at: Date }>(
        'SELECT id, name, scopes, revoked_at, last_used_at, created_at FROM service_keys ORDER BY id',
        { type: QueryTypes.SELECT },
      );
      const lines = rows.map((row) => ({
        id: row.id,
        name: row.name,
        scopes: row.scopes,
        revoked_at: row.revoked_at?.toISOString() ?? null,
        last_used_at: row.last_used_at?.toISOString() ?? null,
        created_at: row.created_at.toISOString(),
      }));
      return { lines };
    };
  },

  revoke(args) {
    const { id: raw } = parse(args, { id: { type: 'string' } });
    if (raw === undefined) throw new UsageError('--id is required');
    if (!/^\d{1,9}$/.test(raw) || Number(raw) < 1) throw new UsageError('--id must be a positive integer');
    const id = Number(raw);
    return async (db) => {
      // A second revoke keeps the first time: the key has been dead since then.
      const [row] = await db.sequelize.query<{ revoked_at: Date }>(
        'UPDATE service_keys SET revoked_at = COALESCE(revoked_at, now()), updated_at = now() WHERE id = $1 RETURNING revoked_at',
        { bind: [id], type: QueryTypes.SELECT },
      );
      if (!row) throw new CommandError(`no service key with id ${id}`);
      return { lines: [{ id, revoked_at: row.revoked_at.toISOString() }], change: { kind: 'service_key', id } };
    };
  },
  'portal-link'(args, env) {
    const values = parse(args, { 'user-id': { type: 'string' }, scope: { type: 'string' }, 'ttl-s': { type: 'string' }, 'session-ttl-s': { type: 'string' } });
    if (values['user-id'] === undefined) throw new UsageError('--user-id is required');
    const userId = integerIn('--user-id', values['user-id'], 1, 99_999);
    const scope = values.scope ?? PORTAL_LINK_LIMITS.defaultScope;
    if (scope !== 'manage' && scope !== 'read') throw new UsageError('--scope must be manage or read');
    const ttlS = lifetime('--ttl-s', values['ttl-s'], PORTAL_LINK_LIMITS.defaultTtlS);
    const sessionTtlS = lifetime('--session-ttl-s', values['session-ttl-s'], PORTAL_LINK_LIMITS.defaultSessionTtlS);
    // The link points at the api: its APP_URL, or its default address (PORT, else 3000).
    const { appUrl } = loadConfig(env, 'api');
    return async (db) => {
      try {
        return { lines: [await createPortalLink(db.sequelize, appUrl, { userId, scope, ttlS, sessionTtlS, createdByKeyId: null })] };
      } catch (err) {
        if (err instanceof PortalUserNotFoundError) throw new CommandError(err.message);
        throw err;
      }
    };
  },
};

/** A portal link's lifetime option in seconds, or its default. */
function lifetime(option: string, raw: string | undefined, fallback: number): number {
  return raw === undefined ? fallback : integerIn(option, raw, PORTAL_LINK_LIMITS.minTtlS, PORTAL_LINK_LIMITS.maxTtlS);
}

function integerIn(option: string, raw: string, min: number, max: number): number {
  if (!/^\d{1,9}$/.test(raw) || Number(raw) < min || Number(raw) > max) throw new UsageError(`${option} must be between ${min} and ${max}`);
  return Number(raw);
}

function parse<T extends Record<string, { type: 'string' }>>(args: string[], options: T) {
  try {
    return parseArgs({ args, options, strict: true, allowPositionals: false }).values as { [K in keyof T]?: string };
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

if (require.main === module) runAsMain(runKeysCli);
