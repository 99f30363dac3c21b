import { randomBytes } from 'node:crypto';
import { QueryTypes } from 'sequelize';
import type { Database, WebhookEndpoint } from '../db';
import { Ed25519KeyPair, generateEd25519KeyPair, isEd25519PublicKey, isEd25519SecretKey, parseEd25519SecretKey } from '../webhook/ed25519';
import { signStandard } from '../webhook/signing';
import { Page, decodeCursor, toPage } from './cursor';
import { EndpointNotFoundError, InvalidCursorError, InvalidEndpointError } from './errors';
import type { DeliveryDeps } from '../queue';
import { saveReenabledEndpoint } from './endpoint-reenable';
import { assertKnownEventTypes } from './event-catalog';
import type { Viewer } from './viewer';

/** An endpoint as the operations API shows it (DESIGN §11); never its secrets. */
export interface EndpointView {
  id: number;
  url: string;
  /** Empty: every event. */
  events: string[];
  description: string | null;
  active: boolean;
  disabled_reason: string | null;
  /** The owning user, or null for an operator endpoint. */
  user_id: number | null;
  /** Sent with every delivery (DESIGN §14); sensitive values read as {@link MASKED}. */
  headers: Record<string, string>;
  /** `fifo`: deliveries arrive one at a time in the order their events were made (DESIGN §6). */
  ordering: EndpointOrdering;
  /** Attempts started per second at most, across all workers (DESIGN §14); null: no limit. */
  rate_limit_per_s: number | null;
  /** Matched against each event's data before a delivery is made (DESIGN §14); null: every event. */
  filter: Record<string, unknown> | null;
  /** `hmac-sha256` (X-Signature and `v1`) or `ed25519` (Standard Webhooks `v1a`), set on create (DESIGN §14). */
  signature_scheme: SignatureScheme;
  /** An ed25519 endpoint's `whpk_` public key, which its receiver verifies with; null for HMAC. */
  public_key: string | null;
  created_at: string;
  updated_at: string;
}

export type EndpointOrdering = 'unordered' | 'fifo';
export type SignatureScheme = 'hmac-sha256' | 'ed25519';

/** What a sensitive header's value reads as; sent back in a PATCH, it keeps the stored value. */
export const MASKED = '********';

/** At most this many bytes of header names and values in all (DESIGN §14). */
const HEADERS_MAX_BYTES = 4096;
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const HEADER_VALUE = /^[\x20-\x7e\t]*$/;
/**
 * Names an endpoint may not set: what the sender sets (the signature set, X-Signature) and what
 * HTTP or the proxy owns (DESIGN §14).
 */
const RESERVED_HEADER_NAMES = new Set([
  'content-type',
  'content-length',
  'host',
  'connection',
  'transfer-encoding',
  'proxy-authorization',
  'x-signature',
  'webhook-id',
  'webhook-timestamp',
  'webhook-signature',
]);

/** A filter's bounds (DESIGN §14). */
const FILTER_MAX_BYTES = 4096;
const FILTER_MAX_DEPTH = 5;

/**
 * Checks an endpoint's `filter` (DESIGN §14): null, or a JSON object of at most 4 KB and 5
 * levels of objects, matched by the database's `webhook_filter_matches`.
 *
 * @throws InvalidEndpointError naming `filter` otherwise
 */
export function assertEndpointFilter(filter: unknown): asserts filter is Record<string, unknown> | null {
  if (filter === null) return;
  if (typeof filter !== 'object' || Array.isArray(filter)) throw new InvalidEndpointError('filter: must be a JSON object, or null.');
  if (Buffer.byteLength(JSON.stringify(filter)) > FILTER_MAX_BYTES) throw new InvalidEndpointError(`filter: at most ${FILTER_MAX_BYTES} bytes of JSON.`);
  const depth = (value: unknown): number => {
    if (Array.isArray(value)) return Math.max(0, ...value.map(depth));
    if (value !== null && typeof value === 'object') return 1 + Math.max(0, ...Object.values(value).map(depth));
    return 0;
  };
  if (depth(filter) > FILTER_MAX_DEPTH) throw new InvalidEndpointError(`filter: at most ${FILTER_MAX_DEPTH} levels of objects.`);
}

/** Whether a header's value is a credential, shown masked (DESIGN §14). */
function isSensitiveHeader(name: string): boolean {
  return name === 'authorization' || name === 'proxy-authorization' || name === 'cookie' || /key|token|secret|auth/.test(name);
}

/** The headers as the API shows them: sensitive values masked. */
export function presentHeaders(headers: Record<string, string> | null | undefined): Record<string, string> {
  return Object.fromEntries(Object.entries(headers ?? {}).map(([name, value]) => [name, isSensitiveHeader(name) ? MASKED : value]));
}

/**
 * An endpoint's static headers as they are stored: names lowercase, each checked against DESIGN
 * §14. With `stored`, a value of {@link MASKED} for a stored sensitive header keeps its value.
 *
 * @throws InvalidEndpointError naming the header: not an HTTP token, reserved, given twice,
 *   a value that is not printable, {@link MASKED} for a header with no stored value, or over 4 KB in all
 */
export function normalizeEndpointHeaders(input: Record<string, unknown>, stored: Record<string, string> = {}): Record<string, string> {
  const out: Record<string, string> = {};
  let bytes = 0;
  const reserved: string[] = [];
  for (const [rawName, rawValue] of Object.entries(input)) {
    if (!HEADER_NAME.test(rawName)) throw new InvalidEndpointError(`headers: "${rawName}" is not a valid HTTP header name.`);
    const name = rawName.toLowerCase();
    if (RESERVED_HEADER_NAMES.has(name)) {
      reserved.push(name);
      continue;
    }
    if (name in out) throw new InvalidEndpointError(`headers: "${name}" is given twice.`);
    if (typeof rawValue !== 'string' || !HEADER_VALUE.test(rawValue)) throw new InvalidEndpointError(`headers: the value of "${name}" must be a string of printable characters.`);
    let value = rawValue;
    if (value === MASKED) {
      if (!isSensitiveHeader(name) || stored[name] === undefined) throw new InvalidEndpointError(`headers: "${name}" has no stored value to keep; send its value.`);
      value = stored[name];
    }
    out[name] = value;
    bytes += Buffer.byteLength(name) + Buffer.byteLength(value);
  }
  if (reserved.length > 0) throw new InvalidEndpointError(`headers: ${reserved.join(', ')} cannot be set; the sender or HTTP sets ${reserved.length === 1 ? 'it' : 'them'}.`);
  if (bytes > HEADERS_MAX_BYTES) throw new InvalidEndpointError(`headers: at most ${HEADERS_MAX_BYTES} bytes of names and values in all.`);
  return out;
}

/** What a new endpoint needs; `userId` null makes an operator endpoint. */
export interface NewEndpoint {
  url: string;
  events?: string[];
  description?: string | null;
  /**
   * Default: a fresh `whsec_` secret ({@link generateEndpointSecret}), or for ed25519 a fresh
   * key pair; an ed25519 endpoint takes only a `whsk_` private key here.
   */
  secret?: string;
  /** Default `hmac-sha256`. */
  signatureScheme?: SignatureScheme;
  userId: number | null;
  /** Checked by {@link normalizeEndpointHeaders}. */
  headers?: Record<string, unknown>;
  ordering?: EndpointOrdering;
  /** 1..10000 or null (checked by the API's schema). */
  rateLimitPerS?: number | null;
  /** Checked by {@link assertEndpointFilter}. */
  filter?: unknown;
}

/** The fields PATCH may change; `active: true` re-enables and clears `disabled_reason`. */
export interface EndpointChanges {
  url?: string;
  events?: string[];
  description?: string | null;
  active?: boolean;
  /** Replaces the whole map; {@link MASKED} keeps a stored sensitive value. */
  headers?: Record<string, unknown>;
  /** A switch to `fifo` orders the deliveries made from then on. */
  ordering?: EndpointOrdering;
  rateLimitPerS?: number | null;
  /** null removes it. */
  filter?: unknown;
}

/** A rotation's result: the new secret (an ed25519 endpoint's: its new `whpk_` public key) and when the old one stops signing. */
export interface RotatedSecret {
  secret: string;
  previousSecretExpiresAt: Date;
}

/** `whsec_` + base64 of 32 random bytes (DESIGN §3: 24..64), the Standard Webhooks secret format. */
export function generateEndpointSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/**
 * @throws InvalidEndpointError for a secret the worker could not sign with (whsec_ + bad base64),
 *   or one that looks like an ed25519 key (`whsk_`, `whpk_`), which an HMAC endpoint cannot use
 */
export function assertEndpointSecret(secret: string): void {
  if (isEd25519SecretKey(secret) || isEd25519PublicKey(secret)) {
    throw new InvalidEndpointError('secret: a whsk_ or whpk_ key needs signature_scheme "ed25519".');
  }
  try {
    signStandard('check', 0, '', secret);
  } catch (error) {
    throw new InvalidEndpointError('Invalid secret: use whsec_ followed by base64, or any other non-empty string.', { cause: error });
  }
}

/**
 * The key pair an ed25519 endpoint signs with: the operator's own `whsk_` key (32-byte seed or
 * 64 bytes seed and public key), or a fresh pair.
 *
 * @throws InvalidEndpointError for anything but a valid `whsk_` key
 */
function ed25519KeyPair(secret: string | undefined): Ed25519KeyPair {
  if (secret === undefined) return generateEd25519KeyPair();
  try {
    return parseEd25519SecretKey(secret);
  } catch (error) {
    throw new InvalidEndpointError(`secret: an ed25519 endpoint takes a whsk_ private key (base64 of 32 or 64 bytes). ${(error as Error).message}`, {
      cause: error,
    });
  }
}

/** The key material of a new or rotated endpoint key: what is stored, and what is shown once. */
function signingKey(scheme: SignatureScheme, given: string | undefined): { secret: string; publicKey: string | null; shown: string } {
  if (scheme === 'ed25519') {
    const pair = ed25519KeyPair(given);
    return { secret: pair.secretKey, publicKey: pair.publicKey, shown: pair.publicKey };
  }
  const secret = given ?? generateEndpointSecret();
  assertEndpointSecret(secret);
  return { secret, publicKey: null, shown: secret };
}

/** @throws InvalidEndpointError for anything but an http(s) URL */
export function assertEndpointUrl(url: string): void {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch (error) {
    throw new InvalidEndpointError(`Invalid endpoint URL: ${url}`, { cause: error });
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new InvalidEndpointError(`Endpoint URL must be http or https: ${url}`);
}

/**
 * Adds an endpoint. Event names must be in the catalog.
 *
 * @returns the endpoint and its secret (shown only now and on rotation); for an ed25519
 *   endpoint the `whpk_` public key in its place (the private key is never shown)
 * @throws InvalidEndpointError for a bad URL or secret; UnknownEventTypeError naming unknown events
 */
export async function createEndpoint(db: Database, input: NewEndpoint): Promise<{ endpoint: EndpointView; secret: string }> {
  assertEndpointUrl(input.url);
  const scheme = input.signatureScheme ?? 'hmac-sha256';
  const key = signingKey(scheme, input.secret);
  const events = uniqueEvents(input.events ?? []);
  const headers = normalizeEndpointHeaders(input.headers ?? {});
  const filter = input.filter ?? null;
  assertEndpointFilter(filter);
  await assertKnownEventTypes(db, events);
  const row = await db.models.WebhookEndpoint.create({
    url: input.url,
    secret: key.secret,
    signatureScheme: scheme,
    publicKey: key.publicKey,
    events,
    description: input.description ?? null,
    userId: input.userId,
    headers,
    ordering: input.ordering ?? 'unordered',
    rateLimitPerS: input.rateLimitPerS ?? null,
    filter,
  });
  return { endpoint: presentEndpoint(row), secret: key.shown };
}

/** Endpoints the viewer may see, newest first, a page of `limit` after `cursor`. */
export async function listEndpoints(db: Database, viewer: Viewer, page: { limit: number; cursor?: string }): Promise<Page<EndpointView>> {
  const bind: unknown[] = [page.limit + 1];
  const where = ['deleted_at IS NULL'];
  if (!viewer.operator) where.push(`user_id = $${bind.push(viewer.userId)}`);
  if (page.cursor) {
    const keyset = decodeCursor(page.cursor);
    if (!/^\d{1,10}$/.test(keyset.id)) throw new InvalidCursorError();
    where.push(
      `(created_at, id) < ('epoch'::timestamptz + $${bind.push(keyset.createdAtMicros)}::bigint * interval '1 microsecond', $${bind.push(Number(keyset.id))}::int)`,
    );
  }
  const rows = await db.sequelize.query<EndpointRow>(
    `SELECT id, url, events, description, active, disabled_reason, user_id, headers, ordering, rate_limit_per_s, filter, signature_scheme, public_key,
            created_at, updated_at,
            (extract(epoch FROM created_at) * 1000000)::bigint::text AS created_at_micros
       FROM webhook_endpoints WHERE ${where.join(' AND ')}
      ORDER BY created_at DESC, id DESC LIMIT $1`,
    { bind, type: QueryTypes.SELECT },
  );
  return toPage(rows, page.limit, (row) => String(row.id), presentEndpointRow);
}

/** The endpoint, or null when it does not exist, was deleted, or the viewer may not see it. */
export async function getEndpoint(db: Database, id: number, viewer: Viewer): Promise<EndpointView | null> {
  const row = await findVisibleEndpoint(db, id, viewer);
  return row && presentEndpoint(row);
}

/**
 * Changes an endpoint. `active: false` records who disabled it and when; `active: true`
 * clears `disabled_reason`, and for a disabled endpoint closes its failure episode
 * (endpoint-reenable.ts, `endpoint.recovered` queued through `deps`).
 *
 * @throws EndpointNotFoundError when the viewer may not see it; InvalidEndpointError,
 *   UnknownEventTypeError for bad changes
 */
export async function updateEndpoint(db: Database, id: number, viewer: Viewer, changes: EndpointChanges, deps?: DeliveryDeps): Promise<EndpointView> {
  const row = await findVisibleEndpoint(db, id, viewer);
  if (!row) throw new EndpointNotFoundError(id);
  const reenabled = changes.active === true && !row.active;
  if (changes.url !== undefined) assertEndpointUrl(changes.url);
  const events = changes.events && uniqueEvents(changes.events);
  const headers = changes.headers && normalizeEndpointHeaders(changes.headers, row.headers);
  if (changes.filter !== undefined) assertEndpointFilter(changes.filter);
  if (events) await assertKnownEventTypes(db, events);
  if (changes.url !== undefined) row.url = changes.url;
  if (headers) row.headers = headers;
  if (changes.ordering !== undefined) row.ordering = changes.ordering;
  if (changes.rateLimitPerS !== undefined) row.rateLimitPerS = changes.rateLimitPerS;
  if (changes.filter !== undefined) row.filter = changes.filter as Record<string, unknown> | null;
  if (events) row.events = events;
  if (changes.description !== undefined) row.description = changes.description;
  if (changes.active === true) {
    row.active = true;
    row.disabledReason = null;
  } else if (changes.active === false && row.active) {
    row.active = false;
    row.disabledReason = `disabled by ${viewer.operator ? 'an operator' : 'its owner'} at ${new Date().toISOString()}`;
  }
  if (reenabled) await saveReenabledEndpoint(db, row, viewer, deps);
  else await row.save();
  return presentEndpoint(row);
}

/**
 * Deletes an endpoint: it is gone from the API and receives nothing more; its pending
 * deliveries end `failed` with `last_error` `endpoint deleted`, and all its deliveries stay
 * readable by operators. The row is kept (inactive, `deleted_at` set) so those deliveries
 * keep their `endpoint_id`.
 *
 * @throws EndpointNotFoundError when the viewer may not see it
 */
export async function deleteEndpoint(db: Database, id: number, viewer: Viewer): Promise<void> {
  await db.sequelize.transaction(async (transaction) => {
    const [rows] = (await db.sequelize.query(
      `UPDATE webhook_endpoints SET deleted_at = now(), active = false, updated_at = now()
        WHERE id = $1 AND deleted_at IS NULL AND ($2::int IS NULL OR user_id = $2)
        RETURNING id`,
      { bind: [id, viewer.operator ? null : viewer.userId], transaction },
    )) as [unknown[], unknown];
    if (rows.length === 0) throw new EndpointNotFoundError(id);
    // endpoint_deleted tells the worker, as for a hard delete, never to sign with another secret.
    await db.sequelize.query(
      `UPDATE webhook_deliveries
          SET endpoint_deleted = true,
              status = CASE WHEN status IN ('pending', 'delivering') THEN 'failed' ELSE status END,
              last_error = CASE WHEN status IN ('pending', 'delivering') THEN 'endpoint deleted' ELSE last_error END,
              next_attempt_at = CASE WHEN status IN ('pending', 'delivering') THEN NULL ELSE next_attempt_at END,
              updated_at = now()
        WHERE endpoint_id = $1`,
      { bind: [id], transaction },
    );
  });
}

/**
 * Makes a new secret current and keeps the old one as `previous_secret` until now +
 * `overlapHours` (DESIGN §7), in one statement: the right-hand sides of SET read the row as
 * it was. The expiry comes from the database clock, the one the worker compares it with. A
 * second rotation within the overlap replaces the previous secret: the oldest stops at once.
 *
 * An ed25519 endpoint gets a new key pair (or the operator's `whsk_` key) and answers its public key.
 *
 * @param options.secret - default: a fresh one; options.overlapHours - checked by the caller
 * @throws EndpointNotFoundError when the viewer may not see it; InvalidEndpointError for a bad secret
 */
export async function rotateEndpointSecret(
  db: Database,
  id: number,
  viewer: Viewer,
  options: { secret?: string; overlapHours: number },
): Promise<RotatedSecret> {
  const endpoint = await findVisibleEndpoint(db, id, viewer);
  if (!endpoint) throw new EndpointNotFoundError(id);
  const key = signingKey(endpoint.signatureScheme, options.secret);
  const [row] = await db.sequelize.query<{ previous_secret_expires_at: Date }>(
    `UPDATE webhook_endpoints
        SET previous_secret = secret, secret = $2, public_key = $5,
            previous_secret_expires_at = now() + make_interval(secs => $3), updated_at = now()
      WHERE id = $1 AND deleted_at IS NULL AND ($4::int IS NULL OR user_id = $4)
      RETURNING previous_secret_expires_at`,
    { bind: [id, key.secret, options.overlapHours * 3600, viewer.operator ? null : viewer.userId, key.publicKey], type: QueryTypes.SELECT },
  );
  if (!row) throw new EndpointNotFoundError(id);
  return { secret: key.shown, previousSecretExpiresAt: row.previous_secret_expires_at };
}

/** The endpoint's row when it exists, is not deleted and the viewer may see it; else null. */
export async function findVisibleEndpoint(db: Database, id: number, viewer: Viewer): Promise<WebhookEndpoint | null> {
  const row = await db.models.WebhookEndpoint.findOne({ where: { id, deletedAt: null } });
  if (!row || (!viewer.operator && row.userId !== viewer.userId)) return null;
  return row;
}

/** The API's view of a model row. */
export function presentEndpoint(row: WebhookEndpoint): EndpointView {
  return {
    id: row.id,
    url: row.url,
    events: row.events,
    description: row.description,
    active: row.active,
    disabled_reason: row.disabledReason,
    user_id: row.userId,
    headers: presentHeaders(row.headers),
    ordering: row.ordering,
    rate_limit_per_s: row.rateLimitPerS,
    filter: row.filter,
    signature_scheme: row.signatureScheme,
    public_key: row.publicKey,
    created_at: row.createdAt.toISOString(),
    updated_at: row.updatedAt.toISOString(),
  };
}

/** A webhook_endpoints row as the list query reads it: the view's fields, with timestamps as Dates. */
type EndpointRow = Omit<EndpointView, 'created_at' | 'updated_at'> & { created_at: Date; updated_at: Date; created_at_micros: string };

function presentEndpointRow(row: EndpointRow): EndpointView {
  return {
    id: row.id,
    url: row.url,
    events: row.events,
    description: row.description,
    active: row.active,
    disabled_reason: row.disabled_reason,
    user_id: row.user_id,
    headers: presentHeaders(row.headers),
    ordering: row.ordering,
    rate_limit_per_s: row.rate_limit_per_s,
    filter: row.filter,
    signature_scheme: row.signature_scheme,
    public_key: row.public_key,
    created_at: new Date(row.created_at).toISOString(),
    updated_at: new Date(row.updated_at).toISOString(),
  };
}

function uniqueEvents(events: readonly string[]): string[] {
  return [...new Set(events)];
}
