import { createHash } from 'node:crypto';
import { Client } from 'pg';
import { Webhook } from 'standardwebhooks';
import { createDatabase } from '../../../shared/db';
import { createMigrator } from '../../../shared/db/migrate';
import { verifyHex } from '../../../shared/webhook';
import { freePort, startService, type ServiceProcess } from '../../support/processes';
import { startRecordingServer, type RecordedRequest, type RecordingServer } from '../../support/recording-server';

/**
 * docs/design.md §15's load and its checks, shared by the fault files: both api layouts, the receiver
 * and two workers run as processes; 8 clients create, update and delete posts through both
 * layouts while an endpoint fails 10% of attempts; each fault is injected in turn. Then the
 * rows and the receipts are checked, and one summary table is printed.
 */

const CLIENTS = 8;
/**
 * Think time of each client between requests, ms: a steady load the machine keeps up with
 * (about 75 changes and 150 deliveries a second on 2 cores). At 60 ms the eight clients fill
 * both cores on a slower run of the same machine, the backlog then grows before any fault,
 * and recovery times measure the saturation, not the recovery.
 */
const PAUSE_MS = Number(process.env.FAULTS_PAUSE_MS ?? 120);
const REQUEST_TIMEOUT_MS = 10_000;
export const SETTLE_MS = 8_000;
export const PG_OUTAGE_MS = 5_000;
/** docs/design.md §15: after Redis restarts empty, what was acknowledged before arrives within 10 s. */
export const REDIS_RECOVERY_PROMISE_S = 10;
const TOKEN = 'faults-suite-writer-token';
const USER_ID = 1;
const SINK_SECRET = 'whsec_' + Buffer.from('faults-suite-sink-secret-0123456789abcdef').toString('base64');
const RECEIVER_SECRET = 'whsec_' + Buffer.from('faults-suite-receiver-secret-0123456789ab').toString('base64');

type Layout = 'a' | 'b';
type ChangeKind = 'create' | 'update' | 'delete';

/** One change a client asked for, and what the api answered. */
export interface Change {
  client: number;
  layout: Layout;
  kind: ChangeKind;
  /** Unknown for a create the api did not acknowledge. */
  pid: number | null;
  /** The post's title after a create or update (unique per change), for matching receipts. */
  title: string | null;
  sentAt: number;
  answeredAt: number;
  /** HTTP status, or null when the request failed without an answer (connection refused, reset, timeout). */
  status: number | null;
  acknowledged: boolean;
}

export interface FaultWindow {
  name: string;
  /** When the fault was injected and when the service answered again, ms since the epoch. */
  at: number;
  back: number;
}

export interface Receipt {
  id: string;
  event: string;
  data: { pid?: number; title?: string };
  receivedAt: number;
  answered: number;
  signaturesValid: boolean;
}

/** Titles are unique per change, so they tell a re-used Layout B pid apart. */
const receiptKey = (event: string, pid: number | undefined, title?: string | null) =>
  event === 'post.deleted' ? `${event}:${pid}` : `${event}:${pid}:${title}`;

const changeKey = (change: Change) =>
  change.kind === 'create'
    ? receiptKey('post.created', change.pid ?? undefined, change.title)
    : change.kind === 'update'
      ? receiptKey('post.updated', change.pid ?? undefined, change.title)
      : receiptKey('post.deleted', change.pid ?? undefined);

export interface SummaryRow {
  fault: string;
  outageS: number;
  changes: number;
  refused: number;
  inFlightAtFault: number;
  recoverS: number;
  duplicates: number;
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A fault: injects it, and resolves once the service answers again. */
export interface FaultStep {
  name: string;
  inject(): Promise<void>;
  /** Load after the service is back, before the next fault, ms. */
  settleMs: number;
}

/** What one run under load gave, for the checks and the summary. */
export interface Outcome {
  rows: SummaryRow[];
  faults: FaultWindow[];
  changes: Change[];
  lost: Change[];
  badSignatures: Receipt[];
  fiveHundreds: Change[];
  statuses: Record<string, number>;
  open: number;
  dead: ServiceProcess[];
}

export type ServiceName = 'api-a' | 'api-b' | 'receiver' | 'worker-1' | 'worker-2';

/** Where the services and the checks find the stores. */
export interface LoadHarnessOptions {
  /** A URL of the suite's own PostgreSQL server to its `postgres` database, for creating `faults`. */
  adminUrl: string;
  /** The `faults` database as the suite's own checks reach it now (after a failover: the new primary). */
  checkUrl(): string;
  /** The `faults` database as the services reach it (a proxy standing in for a DNS name); default: checkUrl() at start. */
  serviceDatabaseUrl?: string;
  /** REDIS_URL (and REDIS_SENTINELS with its name when the run has Sentinels) and any other variable of the services. */
  serviceEnv: Record<string, string>;
}

/** The running system under load, for one fault file. */
export interface LoadHarness {
  services: Map<string, ServiceProcess>;
  /** Starts (again) one service, resolving once it is ready. */
  start(name: ServiceName): Promise<void>;
  /** Runs the load with `steps` injected in turn, waits for every delivery to finish, and measures. */
  underLoad(run: string, steps: FaultStep[]): Promise<Outcome>;
  /** docs/design.md §15's promises, common to every run. */
  expectNothingLost(outcome: Outcome): void;
  /** Changes sent while the fault's service was away. */
  sentDuring(outcome: Outcome, fault: FaultWindow): Change[];
  /** Stops every service and the sink and closes the checks' connection. */
  close(): Promise<void>;
}

/**
 * Creates and migrates the `faults` database, seeds the writer and the two endpoints (the
 * sink failing 10%, the receiver) and starts the five services.
 */
export async function startLoadHarness(options: LoadHarnessOptions): Promise<LoadHarness> {
  const ports = { apiA: await freePort(), apiB: await freePort(), receiver: await freePort(), worker1: await freePort(), worker2: await freePort() };
  const services = new Map<string, ServiceProcess>();
  /** How the sink answered each request: 10% 503 at random. */
  const answers = new Map<RecordedRequest, number>();

  const admin = new Client({ connectionString: options.adminUrl });
  await admin.connect();
  await admin.query('CREATE DATABASE faults');
  await admin.end();
  const database = createDatabase(options.checkUrl(), { poolMax: 1 });
  try {
    await createMigrator(database.sequelize).up();
  } finally {
    await database.close();
  }
  let db = new Client({ connectionString: options.checkUrl() });
  db.on('error', () => undefined);
  await db.connect();

  const sink: RecordingServer = await startRecordingServer();
  sink.setReply((request) => {
    const status = Math.random() < 0.1 ? 503 : 200;
    answers.set(request, status);
    return { status };
  });
  await db.query(`INSERT INTO users (user_id, user_name, user_email, api_token_hash) VALUES ($1, 'writer', 'writer@example.com', $2)`, [
    USER_ID,
    createHash('sha256').update(TOKEN).digest('hex'),
  ]);
  await db.query(`INSERT INTO webhook_endpoints (url, secret, events, description) VALUES ($1, $2, '{}', 'fails 10%')`, [
    `${sink.url}/hooks`,
    SINK_SECRET,
  ]);
  await db.query(`INSERT INTO webhook_endpoints (url, secret, events, description) VALUES ($1, $2, '{}', 'receiver')`, [
    `http://127.0.0.1:${ports.receiver}/webhooks/posts`,
    RECEIVER_SECRET,
  ]);

  const shared: Record<string, string> = {
    NODE_ENV: 'test',
    LOG_LEVEL: 'warn',
    HOST: '127.0.0.1',
    DATABASE_URL: options.serviceDatabaseUrl ?? options.checkUrl(),
    REDIS_PREFIX: 'faults',
    APP_KEY: 'faults-suite-app-key-0123456789',
    RECEIVER_SECRET,
    WEBHOOK_PRIVATE_ALLOWLIST: '127.0.0.1',
    // docs/design.md §15: a first retry after 1 s; OUTBOX_REVIVE_AFTER_MS stays at its default.
    WEBHOOK_RETRY_SCHEDULE: '1,1,1,1,1,1,1',
    RATE_LIMIT_PER_MIN: '0',
    ...options.serviceEnv,
  };
  const definitions = (): Record<ServiceName, [string, Record<string, string>, number]> => ({
    'api-a': ['dist/services/api/src/server.js', { API_LAYOUT: 'a', PORT: String(ports.apiA) }, ports.apiA],
    'api-b': ['dist/services/api/src/server.js', { API_LAYOUT: 'b', PORT: String(ports.apiB) }, ports.apiB],
    receiver: ['dist/services/receiver/src/server.js', { PORT: String(ports.receiver) }, ports.receiver],
    'worker-1': ['dist/services/webhook-worker/src/main.js', { WORKER_METRICS_PORT: String(ports.worker1) }, ports.worker1],
    'worker-2': ['dist/services/webhook-worker/src/main.js', { WORKER_METRICS_PORT: String(ports.worker2) }, ports.worker2],
  });
  const start = async (name: ServiceName) => {
    const [script, extra, port] = definitions()[name];
    services.set(name, await startService(name, script, { ...shared, ...extra }, port, 60_000));
  };
  await Promise.all((['receiver', 'api-a', 'api-b', 'worker-1', 'worker-2'] as const).map(start));

  /** One client: creates a post through its layout, updates it once or twice, deletes half of them. */
  async function runClient(label: string, client: number, stop: { now: boolean }, changes: Change[]): Promise<void> {
    const layout: Layout = client % 2 === 0 ? 'a' : 'b';
    const base = `http://127.0.0.1:${layout === 'a' ? ports.apiA : ports.apiB}/api/v1/posts`;
    const headers = { authorization: `Bearer ${TOKEN}`, user_id: String(USER_ID), 'content-type': 'application/json' };
    const send = async (kind: ChangeKind, pid: number | null, title: string | null): Promise<Change> => {
      const change: Change = { client, layout, kind, pid, title, sentAt: Date.now(), answeredAt: 0, status: null, acknowledged: false };
      const request =
        kind === 'create'
          ? layout === 'a'
            ? { url: `${base}/create`, method: 'POST', body: { title, body: 'under load', userId: USER_ID } }
            : { url: base, method: 'POST', body: { title, content: 'under load' } }
          : kind === 'update'
            ? layout === 'a'
              ? { url: `${base}/update/${pid}`, method: 'PUT', body: { title } }
              : { url: `${base}/${pid}`, method: 'PUT', body: { title, content: 'updated under load' } }
            : { url: layout === 'a' ? `${base}/delete/${pid}` : `${base}/${pid}`, method: 'DELETE', body: undefined };
      try {
        const response = await fetch(request.url, {
          method: request.method,
          headers: request.body ? headers : { authorization: headers.authorization, user_id: headers.user_id },
          body: request.body ? JSON.stringify(request.body) : undefined,
          signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
        });
        const text = await response.text();
        change.status = response.status;
        const json = text ? (JSON.parse(text) as { status?: number; pid?: string; message?: string; item?: { postId: number } }) : {};
        if (kind === 'create' && response.status === 200) {
          const created = layout === 'a' ? (json.status === 200 ? json.item?.postId : undefined) : json.status === 2001 ? Number(json.pid) : undefined;
          if (created !== undefined) {
            change.pid = created;
            change.acknowledged = true;
          }
        } else if (kind === 'update') {
          change.acknowledged = response.status === 200 && (layout === 'a' ? json.status === 200 : json.message === 'Post updated successfully.');
        } else if (kind === 'delete') {
          change.acknowledged = layout === 'a' ? response.status === 204 : response.status === 200 && json.message === 'Post deleted successfully.';
        }
      } catch {
        // No answer: the change may or may not have committed; the checks find out.
      }
      change.answeredAt = Date.now();
      changes.push(change);
      return change;
    };

    for (let n = 0; !stop.now; n += 1) {
      const created = await send('create', null, `${label}-n${n}`);
      await sleep(PAUSE_MS);
      if (!created.acknowledged || stop.now) continue;
      for (let u = 0; u < 1 + (n % 2) && !stop.now; u += 1) {
        await send('update', created.pid, `${label}-n${n}-u${u}`);
        await sleep(PAUSE_MS);
      }
      if (n % 2 === 0 && !stop.now) {
        await send('delete', created.pid, null);
        await sleep(PAUSE_MS);
      }
    }
  }

  /**
   * Runs the clients, injects each fault in turn once the load is steady, stops the load,
   * waits for every delivery row to finish, and measures. Receipts are those of this run only.
   */
  async function underLoad(run: string, steps: FaultStep[]): Promise<Outcome> {
    const changes: Change[] = [];
    const stop = { now: false };
    const faults: FaultWindow[] = [];
    const firstReceipt = sink.requests.length;
    const clients = Array.from({ length: CLIENTS }, (_, client) => runClient(`${run}-c${client}`, client, stop, changes));

    await sleep(SETTLE_MS);
    for (const step of steps) {
      const at = Date.now();
      await step.inject();
      faults.push({ name: step.name, at, back: Date.now() });
      await sleep(step.settleMs);
    }
    stop.now = true;
    await Promise.all(clients);
    const loadEnded = Date.now();

    // Drain: every delivery row finished (the retry schedule is 1 s, 8 attempts).
    await reconnect();
    const drainDeadline = Date.now() + 120_000;
    let open = Infinity;
    while (Date.now() < drainDeadline) {
      open = Number((await db.query(`SELECT count(*) FROM webhook_deliveries WHERE status IN ('pending', 'delivering')`)).rows[0].count);
      if (open === 0) break;
      await sleep(500);
    }
    const drainedAfterS = (Date.now() - loadEnded) / 1000;

    const receipts = readReceipts(sink.requests.slice(firstReceipt));
    const firstArrival = new Map<string, Receipt>();
    for (const receipt of receipts) {
      if (receipt.answered !== 200) continue;
      const key = receiptKey(receipt.event, receipt.data.pid, receipt.data.title);
      const seen = firstArrival.get(key);
      if (!seen || receipt.receivedAt < seen.receivedAt) firstArrival.set(key, receipt);
    }
    const acknowledged = changes.filter((change) => change.acknowledged);
    const unacknowledged = changes.filter((change) => !change.acknowledged);
    const committedUnacknowledged = await committedOf(unacknowledged, firstArrival);
    const okById = new Map<string, number>();
    for (const receipt of receipts) if (receipt.answered === 200) okById.set(receipt.id, (okById.get(receipt.id) ?? 0) + 1);
    const statuses = await deliveryStatuses();

    const rows = faults.map((fault, index) => {
      const pendingAtFault = acknowledged.filter((change) => {
        if (change.answeredAt > fault.at) return false;
        const arrival = firstArrival.get(changeKey(change));
        return !arrival || arrival.receivedAt > fault.at;
      });
      const lastArrival = Math.max(fault.back, ...pendingAtFault.map((change) => firstArrival.get(changeKey(change))?.receivedAt ?? Infinity));
      const windowEnd = faults[index + 1]?.at ?? loadEnded;
      const windowChanges = changes.filter((change) => change.sentAt >= fault.at && change.sentAt < windowEnd);
      const windowIds = new Set(receipts.filter((r) => r.receivedAt >= fault.at && r.receivedAt < windowEnd).map((r) => r.id));
      return {
        fault: fault.name,
        outageS: (fault.back - fault.at) / 1000,
        changes: windowChanges.filter((change) => change.acknowledged).length,
        refused: windowChanges.filter((change) => !change.acknowledged).length,
        inFlightAtFault: pendingAtFault.length,
        recoverS: Math.max(0, (lastArrival - fault.back) / 1000),
        duplicates: [...windowIds].filter((id) => (okById.get(id) ?? 0) > 1).length,
      };
    });
    printSummary(rows, {
      changes: changes.length,
      acknowledged: acknowledged.length,
      unacknowledged: unacknowledged.length,
      committedUnacknowledged: committedUnacknowledged.length,
      deliveries: statuses,
      receipts: receipts.length,
      duplicateIds: [...okById.values()].filter((count) => count > 1).length,
      drainedAfterS,
    });
    return {
      rows,
      faults,
      changes,
      lost: acknowledged.filter((change) => !firstArrival.has(changeKey(change))),
      badSignatures: receipts.filter((receipt) => !receipt.signaturesValid),
      fiveHundreds: changes.filter((change) => change.status !== null && change.status >= 500 && change.status !== 503),
      statuses,
      open,
      dead: [...services.values()].filter((service) => service.child.exitCode !== null || service.child.signalCode !== null),
    };
  }

  /** docs/design.md §15's promises, common to every run. */
  function expectNothingLost(outcome: Outcome): void {
    const since = (time: number) => outcome.faults.map((fault) => `${fault.name} ${((time - fault.at) / 1000).toFixed(2)} s`).join(', ');
    expect(outcome.dead.map((service) => `${service.name}:\n${service.output().slice(-2000)}`)).toEqual([]);
    expect(outcome.open).toBe(0);
    expect(outcome.statuses.failed ?? 0).toBe(0);
    expect(outcome.lost.map((change) => `${change.kind} on ${change.layout} of pid ${change.pid} ${change.title ?? ''} (sent after ${since(change.sentAt)})`)).toEqual(
      [],
    );
    expect(outcome.badSignatures.map((receipt) => receipt.id)).toEqual([]);
    expect(outcome.fiveHundreds.map((change) => `${change.kind} on ${change.layout}: ${change.status}`)).toEqual([]);
  }

  /** Changes sent while the fault's service was away. */
  const sentDuring = (outcome: Outcome, fault: FaultWindow) =>
    outcome.changes.filter((change) => change.sentAt >= fault.at && change.sentAt < fault.back);

  /** The suite's own connection died with PostgreSQL: a fresh one for the checks. */
  async function reconnect(): Promise<void> {
    await db.end().catch(() => undefined);
    db = new Client({ connectionString: options.checkUrl() });
    db.on('error', () => undefined);
    await db.connect();
  }

  /** Every request the sink saw, parsed, with both signatures checked by two implementations. */
  function readReceipts(requests: RecordedRequest[]): Receipt[] {
    const standard = new Webhook(SINK_SECRET);
    return requests.map((request) => {
      const id = String(request.headers['webhook-id']);
      let signaturesValid = verifyHex(request.body, SINK_SECRET, request.headers['x-signature']);
      try {
        standard.verify(request.body.toString('utf8'), request.headers as Record<string, string>);
      } catch {
        signaturesValid = false;
      }
      const envelope = JSON.parse(request.body.toString('utf8')) as { _data: Receipt['data']; _config: Record<string, unknown> };
      return {
        id,
        event: String(envelope._config['app.webhook.event']),
        data: envelope._data,
        receivedAt: request.receivedAt,
        answered: answers.get(request) ?? 0,
        signaturesValid,
      };
    });
  }

  /** Unacknowledged changes whose effect committed anyway (their event arrived, or the post holds their title). */
  async function committedOf(unacknowledged: Change[], arrivals: Map<string, Receipt>): Promise<Change[]> {
    const titles = unacknowledged.filter((change) => change.kind === 'create').map((change) => change.title ?? '');
    const createdTitles = new Set(
      (await db.query<{ post_title: string }>('SELECT post_title FROM posts WHERE post_title = ANY($1)', [titles])).rows.map(
        (row) => row.post_title,
      ),
    );
    const createdArrivals = new Set([...arrivals.values()].filter((r) => r.event === 'post.created').map((r) => r.data.title));
    return unacknowledged.filter((change) =>
      change.kind === 'create'
        ? createdTitles.has(change.title ?? '') || createdArrivals.has(change.title ?? undefined)
        : change.pid !== null && arrivals.has(changeKey(change)),
    );
  }

  async function deliveryStatuses(): Promise<Record<string, number>> {
    const { rows } = await db.query<{ status: string; count: string }>('SELECT status, count(*) FROM webhook_deliveries GROUP BY status');
    return Object.fromEntries(rows.map((row) => [row.status, Number(row.count)]));
  }
  return {
    services,
    start,
    underLoad,
    expectNothingLost,
    sentDuring,
    async close() {
      await Promise.all([...services.values()].map((service) => service.stop('SIGKILL')));
      await sink.close();
      await db.end().catch(() => undefined);
    },
  };
}

/** The table docs/faults.md quotes. */
function printSummary(rows: SummaryRow[], totals: Record<string, unknown>): void {
  const header = '| fault | service away (s) | changes acknowledged | changes refused or unanswered | undelivered at the fault | recovered (s after back) | duplicate receipts |';
  const lines = [
    '',
    'Faults under load (docs/design.md §15): 8 clients, both layouts, two workers, an endpoint failing 10% of attempts',
    '',
    header,
    '|---|---:|---:|---:|---:|---:|---:|',
    ...rows.map(
      (row) =>
        `| ${row.fault} | ${row.outageS.toFixed(1)} | ${row.changes} | ${row.refused} | ${row.inFlightAtFault} | ${row.recoverS.toFixed(1)} | ${row.duplicates} |`,
    ),
    '',
    `Totals: ${JSON.stringify(totals)}`,
    '',
  ];
  process.stdout.write(lines.join('\n') + '\n');
}
