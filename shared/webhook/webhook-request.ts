import type http from 'node:http';
import type { AxiosResponse } from 'axios';
import { loadConfig } from '../config';
import { type EnvelopeConfig, encodeJson, serializeEnvelope } from './envelope';
import { EncryptionError, LogicError, RequestError } from './errors';
import { type EncodedPayload, SEND_FIELDS, type SendField, encodeForField } from './payload-encoding';
import { createWebhookHttpClient } from './http-client';
import type { EnqueueTarget, WebhookQueueBinding } from './queue-binding';
import {
  DEFAULT_SIGNATURE_HEADER,
  type HmacAlgo,
  assertAlgo,
  assertSharedSecret,
  assertSignatureHeaderName,
  deriveSecret,
  newWebhookId,
  signedHeaders,
  verifyHex,
} from './signing';
import { acceptEnvelope } from './verify-incoming';

export type { SendField };

/** A received body: raw bytes or text as it arrived, or (Luminova-compatible) a parsed object. */
export type ReceivedBody = Buffer | string | Record<string, unknown>;

/** Largest answer body `send()` reads unless told otherwise, bytes (1 MiB). */
export const DEFAULT_MAX_RESPONSE_BYTES = 1024 * 1024;

/**
 * Where a secret comes from when none was set (each falls back to APP_KEY / WEBHOOK_SALT), and
 * the bound on what `send()` reads.
 */
export interface WebhookRequestOptions {
  appKey?: string;
  salt?: string;
  /** Largest answer body `send()` reads, bytes; default {@link DEFAULT_MAX_RESPONSE_BYTES}. */
  maxResponseBytes?: number;
  /**
   * Agents `send()` connects with, by the target's scheme, instead of Node's global ones: for
   * example an egress proxy's (the webhook CLI passes WEBHOOK_PROXY_URL's, docs/design.md §14.2). With
   * them, proxy variables of the environment (`HTTP_PROXY` and the like) are not read.
   */
  agents?: { http: http.Agent; https: http.Agent };
}

const client = createWebhookHttpClient();

/**
 * Builds, signs and sends one webhook, or (through {@link WebhookRequest.listen}) verifies one.
 * The operations are those of Luminova's `Luminova\Http\Webhook` (3.6.7 to 3.8) with its
 * defects fixed (docs/design.md §10); the wire format is docs/design.md §7.
 *
 * What is signed is always what travels: for `body`, the JSON envelope is the HTTP body; for
 * `form_params` and `multipart`, the envelope is flattened into form fields as PHP's
 * `http_build_query()` does and the signature covers the encoded HTTP body; for `query`, it
 * covers the query string this call appends to the URL.
 *
 * `enqueue()` hands the webhook to the webhook-worker instead (docs/design.md §6.2). This module loads
 * no queue or database code: the queue side (shared/deliveries/webhook-producer.ts, which the
 * package entry `shared/index.ts` loads) registers itself with {@link WebhookRequest.bindQueue},
 * so code that only signs and sends never loads Sequelize or BullMQ.
 */
export class WebhookRequest {
  private static defaults: WebhookRequestOptions = {};
  /** The queue side of `enqueue()`, once registered. */
  private static queueBinding: WebhookQueueBinding | null = null;

  protected method = 'POST';
  protected timeoutMs = 0;
  protected maxResponseBytes = DEFAULT_MAX_RESPONSE_BYTES;
  protected headers: Record<string, string> = {};
  protected algo: HmacAlgo = 'sha256';
  protected signatureHeader = DEFAULT_SIGNATURE_HEADER;
  protected secret: string | null = null;
  protected signature: string | null = null;
  /** The bytes `signPayload()` signs: the HTTP body, or the query string for `query`. */
  protected rawPayload: Buffer | null = null;
  /** Headers `signPayload()` adds: the hex signature and the Standard Webhooks headers. */
  protected signedValues: Record<string, string> = {};
  private data: unknown = undefined;
  private config: EnvelopeConfig = {};
  private signable = false;
  private webhookId: string | null = null;
  private listening = false;
  private expectedEvent: string | null = null;
  /** Agents of `send()`: the options', else those of {@link WebhookRequest.setDefaults} at creation. */
  private readonly agents: WebhookRequestOptions['agents'];

  /**
   * @param url - the target, absolute http(s) URL
   * @param method - HTTP method, any case; default POST
   * @param timeout - seconds to wait for the answer; 0 (the default) waits forever
   * @param options - app key and salt for a derived secret, else the static defaults, else the
   *   environment (APP_KEY, WEBHOOK_SALT); and the answer size bound
   * @throws LogicError for an invalid method, timeout or answer size bound, or a `whpk_` public
   *   key as the app key
   */
  constructor(
    protected readonly url: string,
    method = 'POST',
    timeout = 0,
    private readonly options: WebhookRequestOptions = {},
  ) {
    this.setMethod(method).setTimeout(timeout);
    if (options.appKey !== undefined) assertSharedSecret(options.appKey);
    this.agents = options.agents ?? WebhookRequest.defaults.agents;
    const maxResponseBytes = options.maxResponseBytes ?? WebhookRequest.defaults.maxResponseBytes;
    if (maxResponseBytes !== undefined) this.setMaxResponseBytes(maxResponseBytes);
  }

  /**
   * Sets the app key, salt, answer size bound and agents of every instance created afterwards,
   * unless its own options say otherwise.
   * @throws LogicError for a `whpk_` public key as the app key (the defaults stay as they were)
   */
  static setDefaults(options: WebhookRequestOptions): void {
    if (options.appKey !== undefined) assertSharedSecret(options.appKey);
    WebhookRequest.defaults = { ...options };
  }

  /**
   * Registers the queue side of `enqueue()` and `closeDefaultProducer()`; the module that owns it
   * calls this when loaded. A later binding replaces an earlier one.
   */
  static bindQueue(binding: WebhookQueueBinding): void {
    WebhookRequest.queueBinding = binding;
  }

  /**
   * Closes the producer that `enqueue()` without an argument opened (its PostgreSQL pool and
   * Redis connection), so the process can exit. The next such `enqueue()` opens a new one.
   * Does nothing when none is open.
   */
  static async closeDefaultProducer(): Promise<void> {
    await WebhookRequest.queueBinding?.closeDefaultProducer();
  }

  /**
   * Starts verifying an incoming webhook (Luminova `Webhook::listen()`).
   *
   * @param signature - the received hex signature header value (`X-Signature` or the
   *   configured name); missing values are accepted here and fail cleanly in `unpack()`
   * @param event - accepted event: exact (`user.created`) or prefix wildcard (`user.*`); null
   *   accepts any
   * @returns a verifying instance; chain `setSecret()` and `setAlgo()`, then `unpack()`
   */
  static listen(signature: string | string[] | null | undefined, event: string | null = null): WebhookRequest {
    const verifier = new WebhookRequest('');
    verifier.listening = true;
    verifier.signature = typeof signature === 'string' && signature !== '' ? signature : null;
    verifier.expectedEvent = event;
    return verifier;
  }

  /** Sets the HTTP method (upper-cased). @throws LogicError when it is not a method token */
  setMethod(method: string): this {
    if (!/^[A-Za-z]+$/.test(method)) throw new LogicError(`Invalid HTTP method "${method}".`);
    this.method = method.toUpperCase();
    return this;
  }

  /**
   * Replaces the custom headers sent with the request. A `Content-Type` here is kept only for
   * the `body` field; the signature and Standard Webhooks headers always win.
   */
  setHeaders(headers: Record<string, string>): this {
    this.headers = { ...headers };
    return this;
  }

  /**
   * Sets the data sent under `_data`: any JSON value, or a raw JSON string, which is checked
   * and embedded as the value it holds when sending.
   */
  setPayload(payload: unknown): this {
    this.data = payload;
    return this;
  }

  /**
   * Adds one key to the data. As in Luminova, data that is not an object first becomes one:
   * an array keeps its indexes as keys, any other value becomes key `0`.
   *
   * @throws EncryptionError when the current data is a raw JSON string that does not parse
   */
  addPayload(name: string, value: unknown): this {
    let current = this.data;
    if (typeof current === 'string') {
      try {
        current = JSON.parse(current);
      } catch (error) {
        throw new EncryptionError('Cannot add to the payload: the raw payload string is not valid JSON.', { cause: error });
      }
    }
    const base = current === undefined || current === null ? {} : typeof current === 'object' ? current : { 0: current };
    this.data = { ...(base as Record<string, unknown>), [name]: value };
    return this;
  }

  /**
   * Sets the shared secret used to sign, or to verify when listening.
   * @throws LogicError for a `whpk_` ed25519 public key: as an HMAC key it lets anyone who
   *   holds it forge X-Signature
   */
  setSecret(secret: string): this {
    assertSharedSecret(secret);
    this.secret = secret;
    return this;
  }

  /** Sets the outgoing event name, written to `_config["app.webhook.event"]`. */
  setEvent(name: string): this {
    this.config = { ...this.config, event: name };
    return this;
  }

  /** Sets the answer timeout in seconds; 0 means none. @throws LogicError when negative or not finite */
  setTimeout(seconds: number): this {
    if (!Number.isFinite(seconds) || seconds < 0) throw new LogicError(`Invalid timeout ${seconds}: expected seconds >= 0.`);
    this.timeoutMs = Math.round(seconds * 1000);
    return this;
  }

  /** Sets the HMAC algorithm of the hex signature. @throws LogicError unless sha256, sha384 or sha512 */
  setAlgo(algo: string): this {
    this.algo = assertAlgo(algo);
    return this;
  }

  /**
   * Sets the hex signature header name (default `X-Signature`).
   * @throws LogicError when it is not an HTTP header token, or names a reserved header (any
   *   case): Host, Content-Type, Content-Length, Transfer-Encoding, Connection, webhook-id,
   *   webhook-timestamp, webhook-signature and the rest of `RESERVED_HEADER_NAMES`
   */
  setSignatureHeader(name: string): this {
    this.signatureHeader = assertSignatureHeaderName(name);
    return this;
  }

  /**
   * Sets the largest answer body `send()` reads, in bytes (default
   * {@link DEFAULT_MAX_RESPONSE_BYTES}, 1 MiB): a larger answer fails with RequestError instead
   * of filling memory.
   * @throws LogicError unless a positive whole number of bytes
   */
  setMaxResponseBytes(bytes: number): this {
    this.maxResponseBytes = assertMaxResponseBytes(bytes);
    return this;
  }

  /**
   * Marks the payload for signing: `send()` will add `"app.webhook.signable":1` and sign.
   * The secret is the argument, else `setSecret()`'s, else one derived from the app key and
   * salt (readable with `getSecret()` after sending).
   * @throws LogicError for a `whpk_` ed25519 public key (see `setSecret()`)
   */
  sign(secret: string | null = null): this {
    if (secret) assertSharedSecret(secret);
    this.signable = true;
    this.config = { ...this.config, signable: true };
    if (secret) this.secret = secret;
    return this;
  }

  /**
   * The payload as set: only the data, or with `withConfig` the whole envelope object
   * `{_data, _config}` (`_config` only when it has keys). Null when no data is set.
   * @throws EncryptionError with `withConfig` when the data cannot be serialised
   */
  getPayload(withConfig = false): unknown {
    if (this.data === undefined || this.data === null) return null;
    if (!withConfig) return this.data;
    return JSON.parse(serializeEnvelope(this.data, this.config));
  }

  /** The hex signature: computed by the last `send()`, or the one given to `listen()`; else null. */
  getSignature(): string | null {
    return this.signature;
  }

  /** The secret in use, derived ones included once `send()` or `unpack()` derived it; else null. */
  getSecret(): string | null {
    return this.secret;
  }

  /** The `webhook-id` of the last signed `send()` or of the last `enqueue()` (its delivery id), or null. */
  getWebhookId(): string | null {
    return this.webhookId;
  }

  /**
   * Sends the request, signing it first when `sign()` was called. Each signed send is a new
   * message: a fresh webhook-id and timestamp. Refused or reset connections are retried up to
   * twice; HTTP answers never are. At most `setMaxResponseBytes()` bytes of the answer are read
   * (default 1 MiB).
   *
   * @param field - where the payload goes (see the class notes); null means `query` for GET,
   *   `body` otherwise
   * @returns the axios response of a 2xx answer
   * @throws LogicError for an unknown field or on a listening instance
   * @throws EncryptionError when signing and the payload is empty or invalid
   * @throws RequestError with `status` and `response` on a non-2xx answer, or with a null
   *   status on a transport failure (refused, reset, timeout) or an answer larger than the bound
   */
  async send(field: SendField | null = null): Promise<AxiosResponse> {
    if (this.listening) throw new LogicError('A listening webhook cannot send; create one with new WebhookRequest(url).');
    if (!this.url) throw new RequestError('Webhook URL is not set.');
    const chosen = field ?? (this.method === 'GET' ? 'query' : 'body');
    if (!SEND_FIELDS.includes(chosen)) {
      throw new LogicError(`Invalid request field "${chosen}": use one of ${SEND_FIELDS.join(', ')}.`);
    }
    const wire = this.encodeWire(chosen);
    this.rawPayload = wire?.bytes ?? null;
    this.signature = null;
    this.signedValues = {};
    if (this.signable) this.signPayload();

    const headers: Record<string, string> = { ...this.headers };
    const userContentType = Object.keys(headers).find((name) => name.toLowerCase() === 'content-type');
    if (wire?.contentType && !(chosen === 'body' && userContentType)) {
      if (userContentType) delete headers[userContentType];
      headers['Content-Type'] = wire.contentType;
    }
    Object.assign(headers, this.signedValues);
    const query = chosen === 'query' && wire ? wire.bytes.toString('utf8') : '';
    const url = query ? `${this.url}${this.url.includes('?') ? '&' : '?'}${query}` : this.url;
    const data = chosen === 'query' ? undefined : wire?.bytes;

    let response: AxiosResponse;
    try {
      response = await client.request({
        url,
        method: this.method,
        headers,
        data,
        timeout: this.timeoutMs,
        maxContentLength: this.maxResponseBytes,
        ...(this.agents ? { httpAgent: this.agents.http, httpsAgent: this.agents.https, proxy: false } : {}),
      });
    } catch (error) {
      if (/maxContentLength/.test((error as Error).message)) {
        throw new RequestError(`Webhook answer is larger than ${this.maxResponseBytes} bytes.`, { cause: error });
      }
      const code = (error as { code?: string }).code ?? (error as Error).message;
      throw new RequestError(`Webhook request failed: ${code}.`, { cause: error });
    }
    if (response.status < 200 || response.status > 299) {
      throw new RequestError(`Webhook endpoint answered HTTP ${response.status}.`, { status: response.status, response });
    }
    return response;
  }

  /**
   * Queues this webhook for the webhook-worker instead of sending it now (docs/design.md §6.2 and §8;
   * Luminova sends synchronously only, so this operation is ours). The delivery row is
   * written to PostgreSQL first, then its id is queued in Redis; when Redis is away the call
   * still succeeds and the api's outbox relay queues the row once Redis answers. The worker
   * retries by the schedule of docs/design.md §6.3 and its own WEBHOOK_TIMEOUT_MS (`setTimeout()` does
   * not apply), and always sends the envelope as the JSON body.
   *
   * Always signed, whether or not `sign()` was called: receivers reject unsigned bodies
   * (docs/design.md §10), so the envelope always carries the event and the signable flag
   * (envelope.ts `serializeEnvelope`). The secret is `sign()`'s or `setSecret()`'s;
   * without one it is derived here, from this instance's app key and salt (docs/design.md §8), and
   * stored with the delivery, so `getSecret()` afterwards returns exactly the secret the
   * receiver must verify with, even when the worker's APP_KEY differs. The worker signs each
   * attempt, so an overridden `signPayload()` does not apply here. Each call is a new delivery
   * with a new id.
   *
   * @param producer - `{ db, queue }` to write to and queue on (see `createWebhookProducer()`
   *   in `shared/deliveries/webhook-producer`); when omitted, one process-wide producer built from
   *   `loadConfig(process.env, 'cli')` (DATABASE_URL, REDIS_URL, REDIS_PREFIX, WEBHOOK_QUEUE_PARTITIONS), opened on first
   *   use and reused; close it with {@link WebhookRequest.closeDefaultProducer}
   * @returns the delivery id (`msg_...`), which the receiver sees as the `webhook-id` header
   *   of every attempt; `getWebhookId()` returns it too
   * @throws LogicError on a listening instance, when no event was set (`setEvent()`), when the
   *   queue side is not loaded (import the class from `shared/index.ts`), or for an unsupported algo
   * @throws InvalidWebhookError (shared/queue) for a URL that is not http(s), a method other
   *   than POST, PUT, PATCH or DELETE, or a malformed `whsec_` secret
   * @throws EncryptionError when the payload is empty or not serialisable
   * @throws ConfigError (shared/config) when the default producer's environment is invalid
   * @throws the database's error when PostgreSQL cannot store the delivery; nothing is queued
   */
  async enqueue(producer?: EnqueueTarget): Promise<string> {
    if (this.listening) throw new LogicError('A listening webhook cannot enqueue; create one with new WebhookRequest(url).');
    const event = this.config.event;
    if (event === undefined) throw new LogicError('Cannot enqueue: set the event with setEvent() first.');
    const binding = WebhookRequest.queueBinding;
    if (!binding) {
      throw new LogicError('Cannot enqueue: the queue side is not loaded; import WebhookRequest from the package entry (shared/index.ts).');
    }
    this.secret ??= this.derivedSecret();
    this.webhookId = await binding.enqueue(
      {
        url: this.url,
        event,
        payload: this.data,
        method: this.method,
        headers: this.headers,
        secret: this.secret,
        algo: this.algo,
        signatureHeader: this.signatureHeader,
      },
      producer,
    );
    return this.webhookId;
  }

  /**
   * Verifies `body` and returns its data (Luminova `unpack()`): the hex signature given to
   * `listen()` must match the raw bytes in constant time, the envelope must carry
   * `"app.webhook.signable":1`, and its event must match the one given to `listen()`.
   *
   * @param callback - receives the verified `_data`; its result is returned
   * @param body - the raw body as received (Buffer or string, verified byte for byte); a parsed
   *   object is accepted for Luminova compatibility and re-encoded as PHP would
   * @returns the `_data` section, or the callback's result
   * @throws LogicError when this instance did not come from `listen()`
   * @throws EncryptionError when the signature is missing or wrong, the body is empty or not
   *   an envelope, it is not marked signable, or its event is refused
   */
  unpack(callback: null | undefined, body: ReceivedBody): unknown;
  unpack<T>(callback: (data: unknown) => T, body: ReceivedBody): T;
  unpack<T>(callback: ((data: unknown) => T) | null | undefined, body: ReceivedBody): T | unknown {
    if (!this.listening) throw new LogicError('Cannot unpack: call WebhookRequest.listen() first.');
    if (!this.signature) throw new EncryptionError(`Missing ${this.signatureHeader} signature.`);
    const bytes = typeof body === 'string' || Buffer.isBuffer(body) ? body : encodeJson(body);
    if (bytes.length === 0) throw new EncryptionError('No request data to handle.');
    this.secret ??= this.derivedSecret();
    if (!verifyHex(bytes, this.secret, this.signature, this.algo)) {
      throw new EncryptionError('Signature mismatch: the payload may have been tampered with.');
    }
    const { data } = acceptEnvelope(bytes, this.expectedEvent);
    return callback ? callback(data) : data;
  }

  /**
   * Whether `body` passes every check of `unpack()` (signature, signable flag, event).
   * @throws LogicError when this instance did not come from `listen()`
   */
  isSignature(body: ReceivedBody): boolean {
    try {
      this.unpack(null, body);
      return true;
    } catch (error) {
      if (error instanceof EncryptionError) return false;
      throw error;
    }
  }

  /**
   * Signs `rawPayload` (Luminova `signPayload()`): derives a secret when none is set, then sets
   * `signature` and `signedValues` (the hex header and the Standard Webhooks headers, with a
   * fresh webhook-id and the current time). Override it to sign differently; keep those fields.
   *
   * @throws EncryptionError when there is nothing to sign
   */
  protected signPayload(): void {
    if (!this.rawPayload || this.rawPayload.length === 0) throw new EncryptionError('Cannot sign: payload is empty or invalid.');
    this.secret ??= this.derivedSecret();
    this.webhookId = newWebhookId();
    const { 'Content-Type': _json, ...values } = signedHeaders({
      id: this.webhookId,
      timestamp: Math.floor(Date.now() / 1000),
      body: this.rawPayload,
      secret: this.secret,
      algo: this.algo,
      signatureHeader: this.signatureHeader,
    });
    this.signature = values[this.signatureHeader];
    this.signedValues = values;
  }

  private encodeWire(field: SendField): EncodedPayload | null {
    if (!this.signable && (this.data === undefined || this.data === null)) return null;
    return encodeForField(field, serializeEnvelope(this.data, this.config));
  }

  private derivedSecret(): string {
    let { appKey, salt } = { ...WebhookRequest.defaults, ...this.options };
    if (appKey === undefined || salt === undefined) {
      const config = loadConfig(process.env, 'cli');
      appKey ??= config.appKey;
      salt ??= config.webhookSalt;
    }
    return deriveSecret(appKey, salt, this.algo);
  }
}

function assertMaxResponseBytes(bytes: number): number {
  if (!Number.isSafeInteger(bytes) || bytes < 1) throw new LogicError(`Invalid answer size bound ${bytes}: expected whole bytes >= 1.`);
  return bytes;
}
