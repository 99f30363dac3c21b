import { QueryTypes, type Transaction } from 'sequelize';
import type { Database, WebhookEndpoint } from '../../db';
import { shownUrl, unmaskUrl } from '../../http/url-display';
import { closeEpisode } from '../../deliveries/episodes';
import { closeCircuitOfMovedEndpoint } from '../../endpoint-gate/circuit-state';
import { endDeliveriesOfDeletedEndpoint } from '../../deliveries/deleted-endpoint';
import { type DeliveryDeps, queueRecordedDeliveries } from '../../deliveries/enqueue';
import { Page, decodeCursor, toPage } from '../cursor';
import { EndpointLimitError, EndpointNotFoundError, InvalidCursorError, InvalidEndpointError } from '../errors';
import { assertKnownEventTypes } from '../event-catalog';
import type { Viewer } from '../viewer';
import { normalizeEndpointAuth } from './auth';
import { normalizeClientCertificate } from './client-certificate';
import { DEVELOPMENT_RULES, type EndpointRules, assertCredentialsFit } from './credential-rules';
import type { EndpointChanges } from './changes';
import { assertEndpointFilter } from './filter';
import { normalizeEndpointHeaders } from './headers';
import { originOf } from './origin';
import { assertCredentialsGivenAgain, signingKey } from './secrets';
import { type EndpointOrdering, type EndpointRow, type EndpointView, type SignatureScheme, presentEndpoint, presentEndpointRow } from './view';

/** What a new endpoint needs; `userId` null makes an operator endpoint. */
export interface NewEndpoint {
  url: string;
  events?: string[];
  description?: string | null;
  /**
   * Default: a fresh `whsec_` secret (secrets.ts `generateEndpointSecret`), or for ed25519 a fresh
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
  /** OAuth2 client credentials, or null (auth.ts `normalizeEndpointAuth`). */
  auth?: unknown;
  /** `{cert, key}` in PEM, or null (client-certificate.ts `normalizeClientCertificate`). */
  clientCertificate?: unknown;
}

/** A rotation's result: the new secret (an ed25519 endpoint's: its new `whpk_` public key) and when the old one stops signing. */
export interface RotatedSecret {
  secret: string;
  previousSecretExpiresAt: Date;
}

/** The refusal of an endpoint URL with userinfo (docs/design.md §11.3): what it holds is a credential the URL would show. */
export const USERINFO_REFUSED = 'credentials go in headers or auth, not in the URL';

/**
 * @throws InvalidEndpointError for anything but an http(s) URL, and {@link USERINFO_REFUSED} for
 *   one with userinfo; the messages show the URL without userinfo and query
 */
export function assertEndpointUrl(url: string): void {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch (error) {
    throw new InvalidEndpointError(`Invalid endpoint URL: ${shownUrl(url)}`, { cause: error });
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new InvalidEndpointError(`Endpoint URL must be http or https: ${shownUrl(url)}`);
  if (parsed.username !== '' || parsed.password !== '') throw new InvalidEndpointError(USERINFO_REFUSED);
}

/**
 * Adds an endpoint. Event names must be in the catalog.
 *
 * @returns the endpoint and its secret (shown only now and on rotation); for an ed25519
 *   endpoint the `whpk_` public key in its place (the private key is never shown)
 * @param rules - the deployment's (credential-rules.ts `endpointRulesOf`); default: no https requirement
 * @throws InvalidEndpointError for a bad URL, secret, header, filter, auth or certificate;
 *   UnknownEventTypeError naming unknown events
 */
export async function createEndpoint(db: Database, input: NewEndpoint, rules: EndpointRules = DEVELOPMENT_RULES): Promise<{ endpoint: EndpointView; secret: string }> {
  assertEndpointUrl(input.url);
  const scheme = input.signatureScheme ?? 'hmac-sha256';
  const key = signingKey(scheme, input.secret);
  const events = uniqueEvents(input.events ?? []);
  const headers = normalizeEndpointHeaders(input.headers ?? {});
  const filter = input.filter ?? null;
  assertEndpointFilter(filter);
  const auth = normalizeEndpointAuth(input.auth ?? null, null);
  const certificate = normalizeClientCertificate(input.clientCertificate ?? null, null);
  assertCredentialsFit({ url: input.url, headers, auth, clientCert: certificate?.cert ?? null }, rules);
  await assertKnownEventTypes(db, events);
  const row = await db.sequelize.transaction(async (transaction) => {
    if (input.userId !== null) await assertRoomForEndpoint(db, transaction, input.userId, rules.maxEndpointsPerUser);
    return db.models.WebhookEndpoint.create(
      {
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
        auth,
        clientCert: certificate?.cert ?? null,
        clientKey: certificate?.key ?? null,
      },
      { transaction },
    );
  });
  return { endpoint: presentEndpoint(row), secret: key.shown };
}

/**
 * @throws EndpointLimitError when the user already owns `limit` endpoints (deleted ones aside).
 * The user's row is locked first and the count is a statement of its own, read after the lock
 * (READ COMMITTED takes a snapshot per statement): of creates racing for the last places, each
 * counts the ones committed before it.
 */
async function assertRoomForEndpoint(db: Database, transaction: Transaction, userId: number, limit: number): Promise<void> {
  await db.sequelize.query('SELECT 1 FROM users WHERE user_id = $1 FOR NO KEY UPDATE', { bind: [userId], type: QueryTypes.SELECT, transaction });
  const [{ owned }] = await db.sequelize.query<{ owned: number }>(
    'SELECT count(*)::int AS owned FROM webhook_endpoints WHERE user_id = $1 AND deleted_at IS NULL',
    { bind: [userId], type: QueryTypes.SELECT, transaction },
  );
  if (owned >= limit) throw new EndpointLimitError(limit);
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
            auth, client_cert, created_at, updated_at,
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
 * clears `disabled_reason`, and for a disabled endpoint closes its failure episode in the same
 * transaction (`endpoint.recovered` when the episode announced `endpoint.failing` or
 * `endpoint.disabled`, docs/design.md §6.6; of two re-enables at once one finds the episode). A
 * move of `url` to another origin must give the stored masked credentials again
 * ({@link assertCredentialsGivenAgain}), and the fields must fit together afterwards
 * ({@link assertCredentialsFit}: `auth` without an authorization header, a client certificate
 * on https only, https for `auth` in production).
 *
 * The row is read, checked and written under its lock: what "********" keeps and the origin it
 * goes to are decided on the same row, so two PATCHes at once never combine into a stored
 * credential at an origin neither was checked against.
 *
 * A move of `url` to another origin bumps `origin_epoch` and ends the failure episode without
 * `endpoint.recovered` (a re-enable in the same change still closes it as a re-enable does),
 * and after commit closes the circuit in Redis (best effort: the worker ignores a circuit of an
 * older epoch anyway), so the answers of the origin it left never count for it (docs/design.md §6.4).
 *
 * @param deps - where to queue a re-enable's `endpoint.recovered` after commit; without it the outbox relay adds them
 * @param rules - the deployment's (credential-rules.ts `endpointRulesOf`); default: no https requirement
 * @throws EndpointNotFoundError when the viewer may not see it; InvalidEndpointError,
 *   UnknownEventTypeError for bad changes
 */
export async function updateEndpoint(
  db: Database,
  id: number,
  viewer: Viewer,
  changes: EndpointChanges,
  deps?: DeliveryDeps,
  rules: EndpointRules = DEVELOPMENT_RULES,
): Promise<EndpointView> {
  if (!(await findVisibleEndpoint(db, id, viewer))) throw new EndpointNotFoundError(id);
  if (changes.url !== undefined) assertEndpointUrl(changes.url);
  const events = changes.events && uniqueEvents(changes.events);
  if (changes.filter !== undefined) assertEndpointFilter(changes.filter);
  // Before the transaction: a second pooled connection inside it could wait on a pool its peers hold.
  if (events) await assertKnownEventTypes(db, events);
  const by = viewer.operator ? 'an operator' : 'its owner';
  const { view, notices, moved } = await db.sequelize.transaction(async (transaction) => {
    const row = await findVisibleEndpoint(db, id, viewer, transaction);
    if (!row) throw new EndpointNotFoundError(id);
    const reenabled = changes.active === true && !row.active;
    const headers = changes.headers && normalizeEndpointHeaders(changes.headers, row.headers);
    const auth = changes.auth === undefined ? row.auth : normalizeEndpointAuth(changes.auth, row.auth);
    const certificate =
      changes.clientCertificate === undefined
        ? undefined
        : normalizeClientCertificate(changes.clientCertificate, row.clientKey);
    if (changes.url !== undefined) assertCredentialsGivenAgain(row, changes.url, changes);
    // The URL as shown gives each sensitive query value as "********": sent back, it keeps the stored one.
    const url = changes.url === undefined ? row.url : unmaskUrl(changes.url, row.url);
    const clientCert = certificate === undefined ? row.clientCert : (certificate?.cert ?? null);
    assertCredentialsFit({ url, headers: headers ?? row.headers, auth, clientCert }, rules);
    const moved = originOf(url) !== originOf(row.url);
    row.url = url;
    if (moved) {
      row.originEpoch += 1;
      if (!reenabled) Object.assign(row, { episodeId: null, failingSince: null, consecutiveFailures: 0, episodeEvents: [] });
    }
    if (headers) row.headers = headers;
    row.auth = auth;
    if (certificate !== undefined) {
      row.clientCert = certificate?.cert ?? null;
      row.clientKey = certificate?.key ?? null;
    }
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
      row.disabledReason = `disabled by ${by} at ${new Date().toISOString()}`;
    }
    await row.save({ transaction });
    const closed = reenabled ? await closeEpisode(db.sequelize, transaction, { endpointId: row.id, reason: `re-enabled by ${by}` }) : [];
    return { view: presentEndpoint(row), notices: closed, moved: moved ? row.originEpoch : null };
  });
  if (moved !== null && deps) {
    const { queue } = deps;
    await queue
      .shards()
      .then((shards) => closeCircuitOfMovedEndpoint(queue.connection, queue.prefix, id, shards, moved))
      .catch((error: unknown) => deps.logger?.warn({ err: error, endpointId: id }, 'could not close the circuit of a moved endpoint; the worker ignores it'));
  }
  if (notices.length > 0 && deps) await queueRecordedDeliveries(deps, notices);
  return view;
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
    await endDeliveriesOfDeletedEndpoint(db.sequelize, transaction, id);
  });
}

/**
 * Makes a new secret current and keeps the old one as `previous_secret` until now +
 * `overlapHours` (docs/design.md §7), in one statement: the right-hand sides of SET read the row as
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

/**
 * The endpoint's row when it exists, is not deleted and the viewer may see it; else null.
 * Inside `transaction`, the row is locked (FOR UPDATE) until it ends.
 */
export async function findVisibleEndpoint(db: Database, id: number, viewer: Viewer, transaction?: Transaction): Promise<WebhookEndpoint | null> {
  const row = await db.models.WebhookEndpoint.findOne({ where: { id, deletedAt: null }, ...(transaction && { transaction, lock: transaction.LOCK.UPDATE }) });
  if (!row || (!viewer.operator && row.userId !== viewer.userId)) return null;
  return row;
}

function uniqueEvents(events: readonly string[]): string[] {
  return [...new Set(events)];
}
