/**
 * A map bounded by the bytes its values take, as the caller weighs them: setting an entry
 * drops the oldest entries until the total fits `maxBytes`. An entry heavier than the whole
 * budget is not kept. Reading an entry does not refresh it (the oldest written goes first).
 */
export class ByteBudgetCache<K, V> {
  private readonly entries = new Map<K, { value: V; bytes: number }>();
  private used = 0;

  /** @param maxBytes - the most the kept entries may weigh together, bytes */
  constructor(readonly maxBytes: number) {}

  /** What the kept entries weigh together, bytes. */
  get bytes(): number {
    return this.used;
  }

  /** How many entries are kept. */
  get size(): number {
    return this.entries.size;
  }

  get(key: K): V | undefined {
    return this.entries.get(key)?.value;
  }

  /**
   * Keeps `value` under `key` (replacing any entry there) as the newest entry.
   * @param bytes - what the value takes in memory, bytes
   * @returns false, keeping nothing, when `bytes` exceeds the whole budget
   */
  set(key: K, value: V, bytes: number): boolean {
    this.delete(key);
    if (bytes > this.maxBytes) return false;
    for (const [oldest, entry] of this.entries) {
      if (this.used + bytes <= this.maxBytes) break;
      this.entries.delete(oldest);
      this.used -= entry.bytes;
    }
    this.entries.set(key, { value, bytes });
    this.used += bytes;
    return true;
  }

  delete(key: K): void {
    const entry = this.entries.get(key);
    if (entry === undefined) return;
    this.entries.delete(key);
    this.used -= entry.bytes;
  }
}
