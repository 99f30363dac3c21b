import { Client } from 'pg';
import { readCpuSeconds } from './children';

/** How often the backends are listed and their CPU read, ms. */
const SAMPLE_EVERY_MS = 250;

/**
 * `url` with `application_name` set, so the backends of the pool it opens can be told apart in
 * pg_stat_activity (node-postgres and Sequelize both take it from the URL's query).
 */
export function withApplicationName(url: string, name: string): string {
  const parsed = new URL(url);
  parsed.searchParams.set('application_name', name);
  return parsed.toString();
}

/** One backend seen by a {@link BackendCpu}: its CPU at the window's start (0 when it started within it) and last read. */
interface Seen {
  name: string;
  base: number;
  last: number;
}

/**
 * The CPU time of the PostgreSQL backends serving one database, by `application_name`, over a
 * window: the backends are listed (pg_stat_activity) and their CPU read (/proc) every 250 ms,
 * so a backend that a pool closes within the window still counts up to its last reading
 * (a pool closes only a connection idle for seconds, so nothing of its work is lost), and one
 * opened within it counts from its start. Backends of other names (the bench's own clients)
 * are left out.
 */
export class BackendCpu {
  private readonly seen = new Map<number, Seen>();
  private timer: NodeJS.Timeout | undefined;
  private sampling: Promise<void> = Promise.resolve();

  private constructor(
    private readonly client: Client,
    private readonly names: readonly string[],
  ) {}

  /**
   * Opens the window: connects to `url` (its own backend is named `bench-sampler`) and reads
   * every backend of `names` once.
   */
  static async start(url: string, names: readonly string[]): Promise<BackendCpu> {
    const client = new Client({ connectionString: withApplicationName(url, 'bench-sampler') });
    await client.connect();
    const sampler = new BackendCpu(client, names);
    await sampler.sample(true);
    sampler.schedule();
    return sampler;
  }

  /** Closes the window: a last reading, then the CPU seconds each name's backends used within it. */
  async stop(): Promise<Map<string, number>> {
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.sampling;
    try {
      await this.sample(false);
    } finally {
      await this.client.end();
    }
    const totals = new Map(this.names.map((name) => [name, 0]));
    for (const { name, base, last } of this.seen.values()) totals.set(name, (totals.get(name) ?? 0) + last - base);
    return totals;
  }

  private schedule(): void {
    this.timer = setTimeout(() => {
      this.sampling = this.sample(false).then(
        () => {
          if (this.timer) this.schedule();
        },
        // The last reading in stop() reports a lost connection.
        () => undefined,
      );
    }, SAMPLE_EVERY_MS);
  }

  private async sample(initial: boolean): Promise<void> {
    const { rows } = await this.client.query<{ pid: number; name: string }>(
      `SELECT pid, application_name AS name FROM pg_stat_activity WHERE datname = current_database() AND application_name = ANY($1::text[])`,
      [this.names],
    );
    for (const { pid, name } of rows) {
      const cpu = readCpuSeconds(pid);
      const known = this.seen.get(pid);
      // A backend gone between the listing and the read reads 0: its last reading stands.
      if (known) known.last = Math.max(known.last, cpu);
      else this.seen.set(pid, { name, base: initial ? cpu : 0, last: cpu });
    }
  }
}
