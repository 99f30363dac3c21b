import { EncryptionError } from './errors';

/** Key of the event name inside `_config` (Luminova 3.6.7 to 3.8, `Webhook::EVENT_KEY`). */
export const EVENT_KEY = 'app.webhook.event';
/** Key of the "this payload is signed" flag inside `_config` (Luminova `Webhook::SIGN_KEY`). */
export const SIGN_KEY = 'app.webhook.signable';

/**
 * The `_config` section of an envelope. Keys are written in the order they appear in this
 * object (the order of the `setEvent()` / `sign()` calls) and only when set: an undefined
 * `event` or a false `signable` writes nothing.
 */
export interface EnvelopeConfig {
  event?: string;
  signable?: boolean;
}

/** A parsed envelope, as a receiver sees it. */
export interface Envelope {
  /** The `_data` section: what the sender passed to `setPayload()` / `addPayload()`. */
  data: unknown;
  /** `_config["app.webhook.event"]` when it is a string, else null. */
  event: string | null;
  /** True only when `_config["app.webhook.signable"]` is exactly 1. */
  signable: boolean;
}

/**
 * Serialises a payload into the Luminova envelope, once; these exact bytes are what gets
 * signed and sent (docs/design.md §7):
 * `{"_data":<payload>,"_config":{"app.webhook.event":"<event>","app.webhook.signable":1}}`.
 *
 * The JSON matches PHP's `json_encode($payload, JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE)`
 * (what Luminova signs) for objects, arrays, strings, integers, booleans and null: slashes and
 * non-ASCII stay literal, and U+2028/U+2029 are escaped as PHP does. Floats with an integral
 * value differ (PHP writes `1.0`, JSON writes `1`).
 *
 * @param payload - any JSON-serialisable value, or a raw JSON string, which is validated and
 *   embedded as the JSON value it holds (so `'{"a": 1}'` becomes `{"a":1}`)
 * @param config - the `_config` keys to write, in this object's key order
 * @returns the body string
 * @throws EncryptionError when the payload is empty (undefined, null, `{}` or `[]`), is a
 *   string that is not valid JSON (`''` included), or cannot be serialised (cycles, BigInt,
 *   functions)
 */
export function serializeEnvelope(payload: unknown, config: EnvelopeConfig = {}): string {
  const data = typeof payload === 'string' ? parseRawPayload(payload) : payload;
  if (isEmpty(data)) throw new EncryptionError('Cannot sign: payload is empty.');
  if (typeof data === 'function' || typeof data === 'symbol') {
    throw new EncryptionError('Cannot sign: payload is not serialisable to JSON.');
  }
  const section: Record<string, string | number> = {};
  for (const key of Object.keys(config) as (keyof EnvelopeConfig)[]) {
    if (key === 'event' && config.event !== undefined) section[EVENT_KEY] = config.event;
    if (key === 'signable' && config.signable) section[SIGN_KEY] = 1;
  }
  const envelope = Object.keys(section).length > 0 ? { _data: data, _config: section } : { _data: data };
  try {
    return encodeJson(envelope);
  } catch (error) {
    throw new EncryptionError('Cannot sign: payload is not serialisable to JSON.', { cause: error });
  }
}

/**
 * `JSON.stringify` made byte-equal to PHP's `json_encode($value, JSON_UNESCAPED_SLASHES |
 * JSON_UNESCAPED_UNICODE)`: the only difference left is that PHP escapes U+2028 and U+2029.
 *
 * @throws TypeError for values JSON cannot hold (cycles, BigInt)
 */
export function encodeJson(value: unknown): string {
  return JSON.stringify(value).replace(/[\u2028\u2029]/g, (c) => (c === '\u2028' ? '\\u2028' : '\\u2029'));
}

/**
 * Parses a received body as an envelope. It does not verify anything: call it on bytes whose
 * signature has already been checked.
 *
 * @param body - the raw body bytes (UTF-8) or string
 * @throws EncryptionError when the body is not JSON or is not an object with a `_data` key
 */
export function parseEnvelope(body: string | Buffer): Envelope {
  let parsed: unknown;
  try {
    parsed = JSON.parse(typeof body === 'string' ? body : body.toString('utf8'));
  } catch (error) {
    throw new EncryptionError('Payload is not valid JSON.', { cause: error });
  }
  if (!isPlainObject(parsed) || !Object.hasOwn(parsed, '_data')) {
    throw new EncryptionError('Payload is not a webhook envelope: the _data key is missing.');
  }
  const config = isPlainObject(parsed._config) ? parsed._config : {};
  const event = config[EVENT_KEY];
  return { data: parsed._data, event: typeof event === 'string' ? event : null, signable: config[SIGN_KEY] === 1 };
}

function parseRawPayload(raw: string): unknown {
  try {
    return JSON.parse(raw);
  } catch (error) {
    throw new EncryptionError('Cannot sign: the raw payload string is not valid JSON.', { cause: error });
  }
}

function isEmpty(data: unknown): boolean {
  if (data === undefined || data === null) return true;
  if (Array.isArray(data)) return data.length === 0;
  return isPlainObject(data) && Object.keys(data).length === 0;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
