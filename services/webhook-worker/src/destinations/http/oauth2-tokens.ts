import { createHash } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { EndpointAuth } from '../../../../../shared/db';
import type { HttpSender, SendResult } from './http-sender';

/** A token, or why none could be had (as the attempt's result: `error` is `oauth2 token: <reason>`). */
export type TokenOutcome = { ok: true; token: string } | { ok: false; result: SendResult };

export interface OAuth2Tokens {
  /**
   * The endpoint's access token: the cached one, or one fetched now (one fetch in flight per
   * endpoint; the others wait for it). `version` names everything the token depends on beyond
   * `auth` (the endpoint's URL, its certificate): a token cached for another version or
   * `auth` is dropped. Waits until `deadline` (`performance.now()` ms) at most.
   */
  get(endpointId: number, auth: EndpointAuth, version: string, deadline: number): Promise<TokenOutcome>;
  /** Forgets `token` if it is still the endpoint's cached one (the endpoint answered it 401). */
  drop(endpointId: number, token: string): void;
  /** Forgets whatever is cached for the endpoint (it no longer has `auth`). */
  forget(endpointId: number): void;
  /** Entries held now (tokens, remembered failures, fetches in flight), one per endpoint at most. */
  readonly size: number;
}

export interface OAuth2TokensOptions {
  /** The worker's HTTP client: the token request passes the SSRF guard and the egress proxy like a delivery. */
  sender: HttpSender;
  /** A token request's bound, ms (WEBHOOK_TIMEOUT_MS). */
  timeoutMs: number;
  /** How often at most expired entries are swept out, ms; default 60 s. Tests shorten it. */
  sweepEveryMs?: number;
}

/** Without `expires_in` a token is kept this long, ms (docs/design.md §14.4). */
const DEFAULT_TOKEN_TTL_MS = 300_000;
/** A token is dropped this long before it expires, unless that is more than half its life, ms. */
const EXPIRY_MARGIN_MS = 30_000;
/** Expired entries are swept out at most this often, ms. */
const SWEEP_EVERY_MS = 60_000;
/** A failed token request is remembered this long: the attempts meanwhile fail the same way without asking again, ms. */
const FAILURE_TTL_MS = 5_000;
/** Bytes of the token endpoint's answer read at most (a JWT access token can pass 2 KB). */
const TOKEN_ANSWER_BYTES = 65_536;
/** RFC 6750 §2.1 b64token, and any printable ASCII some servers use: what a header value may carry. */
const HEADER_SAFE_TOKEN = /^[\x21-\x7e]+$/;
/** RFC 6749 §5.2 error codes: the only part of a refusal's body named in `last_error`. */
const REGISTERED_ERRORS = new Set(['invalid_request', 'invalid_client', 'invalid_grant', 'unauthorized_client', 'unsupported_grant_type', 'invalid_scope']);

/** A request that got no answer, the base of a failure's result. */
const NO_ANSWER: SendResult = { statusCode: null, retryAfterMs: null, timedOut: false, blocked: false, error: null, response: null, durationMs: 0, proxyUnauthorized: false };

type Entry =
  | { key: string; state: 'pending'; fetch: Promise<TokenOutcome> }
  | { key: string; state: 'token'; token: string; until: number }
  | { key: string; state: 'failed'; result: SendResult; until: number };

/**
 * OAuth2 client credentials for endpoints (docs/design.md §14.4; RFC 6749 §4.4): the token
 * request is a form POST of `grant_type=client_credentials` (with `scope` and `audience` when
 * set) with the client authenticated by HTTP Basic (§2.3.1: id and secret form-urlencoded
 * first). Tokens live in this process's memory only (never Redis), one entry per endpoint keyed
 * by a hash of its `auth` and version, for max(expires_in − 30 s, expires_in / 2), or 300 s
 * without `expires_in`; a failed request is remembered for 5 s. A failure never names the
 * token endpoint's body, only its status and an RFC 6749 §5.2 error code. An entry of another
 * `auth` or version (credentials changed, the URL moved) is replaced at the endpoint's next
 * attempt, and expired entries are swept out (at most once a minute, as attempts ask), so
 * endpoints deleted, disabled or no longer using OAuth2 leave nothing behind.
 */
export function createOAuth2Tokens(options: OAuth2TokensOptions): OAuth2Tokens {
  const { sender, timeoutMs } = options;
  const sweepEveryMs = options.sweepEveryMs ?? SWEEP_EVERY_MS;
  const entries = new Map<number, Entry>();
  let sweptAt = performance.now();

  /** Drops the entries whose time is up; a fetch in flight stays (its waiters hold it). */
  function sweep(now: number): void {
    if (now - sweptAt < sweepEveryMs) return;
    sweptAt = now;
    for (const [endpointId, entry] of entries) if (entry.state !== 'pending' && entry.until <= now) entries.delete(endpointId);
  }

  async function fetchToken(endpointId: number, key: string, auth: EndpointAuth): Promise<TokenOutcome> {
    const started = performance.now();
    const result = await sender.send({
      url: auth.token_url,
      method: 'POST',
      body: Buffer.from(tokenRequestBody(auth)),
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        accept: 'application/json',
        authorization: `Basic ${Buffer.from(`${formEncode(auth.client_id)}:${formEncode(auth.client_secret)}`).toString('base64')}`,
      },
      deadline: started + timeoutMs,
      excerptBytes: TOKEN_ANSWER_BYTES,
    });
    const outcome = readTokenAnswer(result);
    if (entries.get(endpointId)?.key !== key) return outcome;
    if (outcome.ok) entries.set(endpointId, { key, state: 'token', token: outcome.token, until: started + ttlOf(result) });
    // The proxy refusing the worker's credentials is the operator's outage, not the token endpoint's.
    else if (outcome.result.proxyUnauthorized) entries.delete(endpointId);
    else entries.set(endpointId, { key, state: 'failed', result: outcome.result, until: performance.now() + FAILURE_TTL_MS });
    return outcome;
  }

  return {
    async get(endpointId, auth, version, deadline) {
      sweep(performance.now());
      const key = keyOf(auth, version);
      let entry = entries.get(endpointId);
      if (entry && (entry.key !== key || (entry.state !== 'pending' && entry.until <= performance.now()))) entry = undefined;
      if (entry?.state === 'token') return { ok: true, token: entry.token };
      if (entry?.state === 'failed') return { ok: false, result: entry.result };
      if (!entry) {
        const fetch = fetchToken(endpointId, key, auth).catch((error: unknown) => {
          // The sender never throws; should anything else, the next attempt asks again.
          if (entries.get(endpointId) === entry) entries.delete(endpointId);
          return failed(NO_ANSWER, error instanceof Error ? error.message : String(error));
        });
        entry = { key, state: 'pending', fetch };
        entries.set(endpointId, entry);
      }
      return beforeDeadline(entry.fetch, deadline, timeoutMs);
    },
    drop(endpointId, token) {
      const entry = entries.get(endpointId);
      if (entry?.state === 'token' && entry.token === token) entries.delete(endpointId);
    },
    forget(endpointId) {
      entries.delete(endpointId);
    },
    get size() {
      sweep(performance.now());
      return entries.size;
    },
  };
}

/** What the token endpoint's answer comes to. */
function readTokenAnswer(result: SendResult): TokenOutcome {
  if (result.error !== null) return failed(result, result.error);
  const status = result.statusCode ?? 0;
  const answer = parseJson(result.response);
  if (status < 200 || status > 299) {
    const code = typeof answer?.error === 'string' && REGISTERED_ERRORS.has(answer.error) ? ` ${answer.error}` : '';
    return failed(result, `HTTP ${status}${code}`);
  }
  const token = answer?.access_token;
  if (typeof token !== 'string' || !HEADER_SAFE_TOKEN.test(token)) return failed(result, 'the answer has no usable access_token');
  const type = answer?.token_type;
  if (type !== undefined && (typeof type !== 'string' || type.toLowerCase() !== 'bearer')) return failed(result, 'the token_type is not Bearer');
  return { ok: true, token };
}

/** max(expires_in − 30 s, expires_in / 2) in ms, or 300 s when the answer has no usable `expires_in`. */
function ttlOf(result: SendResult): number {
  const expiresIn = Number(parseJson(result.response)?.expires_in);
  if (!Number.isFinite(expiresIn) || expiresIn < 0) return DEFAULT_TOKEN_TTL_MS;
  return Math.max(expiresIn * 1000 - EXPIRY_MARGIN_MS, (expiresIn * 1000) / 2);
}

/** The attempt's result for a token that could not be had: no status of the endpoint's, no body. */
function failed(result: SendResult, reason: string): TokenOutcome {
  return {
    ok: false,
    result: { ...result, statusCode: null, retryAfterMs: null, response: null, error: result.proxyUnauthorized ? reason : `oauth2 token: ${reason}` },
  };
}

/** The token request's form body (RFC 6749 §4.4.2; `audience` as Auth0 and others take it). */
function tokenRequestBody(auth: EndpointAuth): string {
  const form = new URLSearchParams({ grant_type: 'client_credentials' });
  if (auth.scope) form.set('scope', auth.scope);
  if (auth.audience) form.set('audience', auth.audience);
  return form.toString();
}

/** application/x-www-form-urlencoded, as RFC 6749 §2.3.1 asks of the id and secret before Basic. */
function formEncode(value: string): string {
  return new URLSearchParams({ v: value }).toString().slice(2);
}

function parseJson(text: string | null): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text ?? '');
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** The cache key: the endpoint's `auth` and version, hashed (the secret never sits in a key in the clear). */
function keyOf(auth: EndpointAuth, version: string): string {
  const fields = [auth.type, auth.token_url, auth.client_id, auth.client_secret, auth.scope ?? '', auth.audience ?? '', version];
  return createHash('sha256').update(JSON.stringify(fields)).digest('base64url');
}

/** Settles as the fetch does, or as a timeout of the attempt once `deadline` passes first. */
function beforeDeadline(fetch: Promise<TokenOutcome>, deadline: number, timeoutMs: number): Promise<TokenOutcome> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<TokenOutcome>((resolve) => {
    timer = setTimeout(
      () =>
        resolve({ ok: false, result: { ...NO_ANSWER, timedOut: true, durationMs: timeoutMs, error: `oauth2 token: timeout: No complete answer within ${timeoutMs} ms.` } }),
      Math.max(0, deadline - performance.now()),
    );
  });
  return Promise.race([fetch, late]).finally(() => clearTimeout(timer));
}
