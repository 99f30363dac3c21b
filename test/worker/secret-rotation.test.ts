import { spawnSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { RecordedRequest, RecordingServer, startRecordingServer } from '../support/recording-server';
import { addEndpoint, createProducer, Producer, recordEvent, resetAndClose, startWorker } from './support/harness';

const CLI = path.resolve(__dirname, '../../dist/scripts/endpoints-cli.js');
const OLD_SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

describe('webhook worker: secret rotation', () => {
  let env: TestEnvironment;
  let producer: Producer;
  let receiver: RecordingServer;
  let running: ReturnType<typeof startWorker>;

  beforeAll(async () => {
    if (!existsSync(CLI)) throw new Error('the CLI is not built: run `npm run build` first');
    env = await createTestEnvironment({ WEBHOOK_RETRY_SCHEDULE: '0.05' }, 'worker');
  });

  beforeEach(async () => {
    producer = createProducer(env.config);
    await producer.queue.waitUntilReady();
    receiver = await startRecordingServer();
    running = startWorker(env.config, producer.db);
  });

  afterEach(async () => {
    await running.close();
    await resetAndClose(producer);
    await receiver.close();
  });

  afterAll(async () => {
    await env.cleanup();
  });

  /** Rotates through the real CLI, as an operator would. */
  function rotate(id: number, ...args: string[]): { secret: string; previous_secret_expires_at: string } {
    const result = spawnSync(process.execPath, [CLI, 'rotate', '--id', String(id), ...args], {
      env: { PATH: process.env.PATH ?? '', NODE_ENV: 'test', DATABASE_URL: env.databaseUrl },
      encoding: 'utf8',
    });
    if (result.status !== 0) throw new Error(`rotate failed: ${result.stderr}`);
    return JSON.parse(result.stdout);
  }

  async function deliverOne(): Promise<RecordedRequest> {
    const already = receiver.requests.length;
    await recordEvent(producer, 'post.created');
    const requests = await receiver.waitForRequests(already + 1);
    return requests[already];
  }

  /** Verifies with the official library, as a receiver would, with one `webhook-signature` entry. */
  function verifyEntry(request: RecordedRequest, secret: string, entry: string): unknown {
    return new Webhook(secret).verify(request.body.toString('utf8'), {
      'webhook-id': String(request.headers['webhook-id']),
      'webhook-timestamp': String(request.headers['webhook-timestamp']),
      'webhook-signature': entry,
    });
  }

  const hexHmac = (secret: string, body: Buffer) => createHmac('sha256', secret).update(body).digest('hex');

  it('When an endpoint was rotated, then a delivery carries the new and the old v1 signature, each verifying with its own secret, and X-Signature uses the new one', async () => {
    const endpoint = await addEndpoint(producer.db, `${receiver.url}/hooks`, { secret: OLD_SECRET });
    const { secret: newSecret } = rotate(endpoint.id);

    const request = await deliverOne();

    const entries = String(request.headers['webhook-signature']).split(' ');
    expect(entries).toHaveLength(2);
    expect(entries.every((entry) => entry.startsWith('v1,'))).toBe(true);
    const expected = JSON.parse(request.body.toString('utf8'));
    expect(verifyEntry(request, newSecret, entries[0])).toEqual(expected);
    expect(verifyEntry(request, OLD_SECRET, entries[1])).toEqual(expected);
    expect(() => verifyEntry(request, OLD_SECRET, entries[0])).toThrow(WebhookVerificationError);
    expect(() => verifyEntry(request, newSecret, entries[1])).toThrow(WebhookVerificationError);
    // A receiver on either secret accepts the whole header as sent.
    for (const secret of [newSecret, OLD_SECRET]) {
      expect(verifyEntry(request, secret, String(request.headers['webhook-signature']))).toEqual(expected);
    }
    expect(request.headers['x-signature']).toBe(hexHmac(newSecret, request.body));
  });

  it('When the overlap has expired, then a delivery carries only the new signature and the old secret no longer verifies', async () => {
    const endpoint = await addEndpoint(producer.db, `${receiver.url}/hooks`, { secret: OLD_SECRET });
    const { secret: newSecret } = rotate(endpoint.id, '--overlap-hours', '1');
    const during = await deliverOne();
    // Move the expiry into the past rather than waiting an hour.
    await producer.db.sequelize.query(
      `UPDATE webhook_endpoints SET previous_secret_expires_at = now() - interval '1 second' WHERE id = $1`,
      { bind: [endpoint.id] },
    );

    const after = await deliverOne();

    expect(String(during.headers['webhook-signature']).split(' ')).toHaveLength(2);
    const signature = String(after.headers['webhook-signature']);
    expect(signature.split(' ')).toHaveLength(1);
    expect(verifyEntry(after, newSecret, signature)).toEqual(JSON.parse(after.body.toString('utf8')));
    expect(() => verifyEntry(after, OLD_SECRET, signature)).toThrow(WebhookVerificationError);
    expect(after.headers['x-signature']).toBe(hexHmac(newSecret, after.body));
  });

  it('When an endpoint is rotated with --overlap-hours 0, then the next delivery is signed with the new secret only', async () => {
    const endpoint = await addEndpoint(producer.db, `${receiver.url}/hooks`, { secret: OLD_SECRET });
    const { secret: newSecret } = rotate(endpoint.id, '--overlap-hours', '0');

    const request = await deliverOne();

    const signature = String(request.headers['webhook-signature']);
    expect(signature.split(' ')).toHaveLength(1);
    expect(verifyEntry(request, newSecret, signature)).toBeDefined();
  });
});
