import { QueryTypes } from 'sequelize';
import { createDatabase, Database } from '../../shared/db';
import { DurationHistogram, durationBucket, durationPercentile } from '../../shared/stats/histogram';
import { TestEnvironment, createTestEnvironment } from '../support/environment';

/** PostgreSQL's percentile_cont over sorted values: interpolated between the two nearest ranks. */
function exactPercentile(sorted: number[], q: number): number {
  const rank = q * (sorted.length - 1);
  const low = Math.floor(rank);
  return low === rank ? sorted[low] : sorted[low] + (rank - low) * (sorted[low + 1] - sorted[low]);
}

/** Whole-millisecond durations of a known, skewed distribution: log-uniform from 2 ms to 20 s, fixed seed. */
function durations(count: number): number[] {
  let seed = 12345;
  const next = () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  return Array.from({ length: count }, () => Math.round(2 * 10_000 ** next()));
}

const histogramOf = (values: number[]): DurationHistogram => {
  const histogram: DurationHistogram = {};
  for (const value of values) histogram[durationBucket(value)] = (histogram[durationBucket(value)] ?? 0) + 1;
  return histogram;
};

describe('the stats duration histogram (docs/design.md §14)', () => {
  let env: TestEnvironment;
  let db: Database;

  beforeAll(async () => {
    env = await createTestEnvironment();
    db = createDatabase(env.config.databaseUrl, { poolMax: 1 });
  });

  afterAll(async () => {
    await db.close();
    await env.cleanup();
  });

  it('when p50 and p95 come from the histogram of a known distribution, then each is within 5% of the exact figure', () => {
    for (const count of [1, 2, 7, 100, 10_000]) {
      const values = durations(count);
      const histogram = histogramOf(values);
      const sorted = [...values].sort((x, y) => x - y);
      for (const q of [0.5, 0.95]) {
        const exact = exactPercentile(sorted, q);
        expect(Math.abs((durationPercentile(histogram, q) ?? NaN) - exact)).toBeLessThanOrEqual(Math.max(0.05 * exact, 0.5));
      }
    }
    expect(durationPercentile({}, 0.5)).toBeNull();
    expect(durationPercentile(histogramOf([0, 0, 0]), 0.95)).toBe(0);
  });

  it('when PostgreSQL buckets a duration, then it picks the bucket the reads expect', async () => {
    const values = [0, 1, 2, 3, 9, 10, 11, 99, 100, 101, 1_000, 29_999, 30_000, 600_000];
    const [row] = await db.sequelize.query<{ buckets: number[] }>('SELECT array(SELECT webhook_duration_bucket(v) FROM unnest($1::int[]) AS v) AS buckets', {
      bind: [values],
      type: QueryTypes.SELECT,
    });
    expect(row.buckets).toEqual(values.map(durationBucket));
  });
});
