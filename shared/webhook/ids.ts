import { randomBytes } from 'node:crypto';

/**
 * The 16 bytes of a UUIDv7 (RFC 9562 §5.7): 48-bit unix milliseconds big-endian, the version
 * nibble 7, 74 random bits and the variant bits 10. Ids built on it sort by the time they were
 * made, so an id says which day's rows hold it (docs/design.md §3.3).
 *
 * @param nowMs - unix time in milliseconds; default the clock
 */
export function uuidV7Bytes(nowMs: number = Date.now()): Buffer {
  const bytes = randomBytes(16);
  bytes.writeUIntBE(nowMs, 0, 6);
  bytes[6] = (bytes[6] & 0x0f) | 0x70;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  return bytes;
}

/**
 * A fresh event id (docs/design.md §3.3): `evt_` and 22 base64url characters of a UUIDv7.
 *
 * @param nowMs - its time, unix milliseconds; default the clock (a delivery's own time puts its event in its day)
 */
export function newEventId(nowMs: number = Date.now()): string {
  return `evt_${uuidV7Bytes(nowMs).toString('base64url')}`;
}

/**
 * When a `msg_` or `evt_` id was made: the UUIDv7 milliseconds it carries, or null for an id
 * that holds no UUIDv7 (an older, random id, or one given by a caller).
 */
export function idTime(id: string): Date | null {
  const match = /^(?:msg|evt)_([A-Za-z0-9_-]{22})$/.exec(id);
  if (!match) return null;
  const bytes = Buffer.from(match[1], 'base64url');
  if (bytes.length !== 16 || bytes[6] >> 4 !== 7 || bytes[8] >> 6 !== 2) return null;
  return new Date(bytes.readUIntBE(0, 6));
}
