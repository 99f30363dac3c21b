/**
 * The duration histogram of the stats (docs/design.md §14): log-spaced buckets, each `GAMMA`
 * times as wide as the one before, as DDSketch keeps them. Bucket `i` holds the durations in
 * (GAMMA^(i-1), GAMMA^i] ms, and -1 holds 0 ms; its representative value 2·GAMMA^i/(GAMMA+1)
 * is within (GAMMA-1)/(GAMMA+1) ≈ 4.8% of every duration it holds. The SQL function
 * `webhook_duration_bucket(ms)` is the same mapping, on the database's side.
 */

/** The growth factor of one bucket to the next. */
export const DURATION_GAMMA = 1.1;

/** A histogram in memory: bucket index (as a string key) → attempts. */
export type DurationHistogram = Record<string, number>;

/** The bucket index of a duration in whole milliseconds (-1 for 0 ms or less). */
export function durationBucket(ms: number): number {
  return ms <= 0 ? -1 : Math.ceil(Math.log(ms) / Math.log(DURATION_GAMMA));
}

/** The value a bucket stands for, ms (not rounded): 0 for bucket -1. */
export function bucketValue(index: number): number {
  return index < 0 ? 0 : (2 * DURATION_GAMMA ** index) / (DURATION_GAMMA + 1);
}

/**
 * A histogram from its stored text, `bucket:attempts` pairs apart by spaces; a bucket named
 * more than once (several rows' text joined) adds up. Null or empty: no attempts.
 */
export function parseDurations(text: string | null): DurationHistogram {
  // A scan of the characters: the text of a day's rows runs to hundreds of kB, too many pairs to split.
  const counts = new Map<number, number>();
  if (text) {
    let key = 0;
    let value = 0;
    let negative = false;
    let inValue = false;
    for (let i = 0; i <= text.length; i += 1) {
      const code = i < text.length ? text.charCodeAt(i) : 32;
      if (code >= 48 && code <= 57) {
        if (inValue) value = value * 10 + code - 48;
        else key = key * 10 + code - 48;
      } else if (code === 45) negative = true;
      else if (code === 58) inValue = true;
      else {
        if (inValue) {
          const bucket = negative ? -key : key;
          counts.set(bucket, (counts.get(bucket) ?? 0) + value);
        }
        key = 0;
        value = 0;
        negative = false;
        inValue = false;
      }
    }
  }
  const histogram: DurationHistogram = {};
  for (const [bucket, count] of counts) histogram[bucket] = count;
  return histogram;
}

/**
 * The `q` quantile (0 to 1) of the durations a histogram holds, interpolated between the two
 * nearest ranks as PostgreSQL's `percentile_cont` does, each rank's value its bucket's
 * representative: within 5% of the exact figure. Whole milliseconds; null when it holds none.
 */
export function durationPercentile(histogram: DurationHistogram, q: number): number | null {
  const buckets = Object.entries(histogram)
    .map(([key, count]) => [Number(key), Number(count)] as const)
    .filter(([, count]) => count > 0)
    .sort((x, y) => x[0] - y[0]);
  const total = buckets.reduce((sum, [, count]) => sum + count, 0);
  if (total === 0) return null;
  const rank = q * (total - 1);
  const valueAt = (position: number): number => {
    let seen = 0;
    for (const [index, count] of buckets) {
      seen += count;
      if (position < seen) return bucketValue(index);
    }
    return bucketValue(buckets[buckets.length - 1][0]);
  };
  const low = Math.floor(rank);
  const lowValue = valueAt(low);
  const value = rank === low ? lowValue : lowValue + (rank - low) * (valueAt(low + 1) - lowValue);
  return Math.round(value);
}
