import { encodeJson, serializeEnvelope } from '../webhook/envelope';

/**
 * The data of an event published with `payload` (docs/design.md §14.3): a string that parses as
 * JSON is the event whose data is the value it encodes; any other string stays a string; any
 * other value is the data itself. This is the envelope's `_data` ({@link eventEnvelope}), which
 * fan-out, replay and the receiver all read, so a filter is matched against it everywhere.
 */
export function eventDataOf(payload: unknown): unknown {
  if (typeof payload !== 'string') return payload;
  try {
    return JSON.parse(payload) as unknown;
  } catch {
    return payload;
  }
}

/**
 * The docs/design.md §7 envelope of an event, signable: the exact bytes every delivery of it sends.
 * A string is sent as that string (serializeEnvelope alone would read it as raw JSON, a second
 * time for a payload {@link eventDataOf} already decoded).
 *
 * @param data - the event's data: any non-empty JSON value
 * @throws EncryptionError (shared/webhook) when `data` is empty (undefined, null, `{}`, `[]`) or
 *   not serialisable
 */
export function eventEnvelope(event: string, data: unknown): string {
  return serializeEnvelope(typeof data === 'string' ? encodeJson(data) : data, { event, signable: true });
}
