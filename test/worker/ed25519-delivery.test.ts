import nacl from 'tweetnacl';
import { OPERATOR, createEndpoint, rotateEndpointSecret } from '../../shared/operations';
import { verifyIncoming } from '../../shared/webhook';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { RecordedRequest, RecordingServer, startRecordingServer } from '../support/recording-server';
import { createProducer, Producer, recordEvent, resetAndClose, startWorker } from './support/harness';

/** Verifies one `v1a` entry with tweetnacl, an ed25519 implementation independent of ours. */
function naclVerifies(request: RecordedRequest, entry: string, publicKey: string): boolean {
  const message = Buffer.from(`${request.headers['webhook-id']}.${request.headers['webhook-timestamp']}.${request.body.toString('utf8')}`, 'utf8');
  return nacl.sign.detached.verify(message, Buffer.from(entry.slice(4), 'base64'), Buffer.from(publicKey.slice(5), 'base64'));
}

/** docs/design.md §14.1 `signature_scheme: "ed25519"`: deliveries signed `v1a`, rotation with overlap. */
describe('webhook worker: ed25519 endpoints', () => {
  let env: TestEnvironment;
  let producer: Producer;
  let receiver: RecordingServer;
  let running: ReturnType<typeof startWorker>;

  beforeAll(async () => {
    env = await createTestEnvironment({ WEBHOOK_RETRY_SCHEDULE: '0.05' }, 'worker');
    producer = createProducer(env.config);
    await producer.queue.waitUntilReady();
    receiver = await startRecordingServer();
    running = startWorker(env.config, producer.db);
  });

  afterAll(async () => {
    await running.close();
    await resetAndClose(producer);
    await receiver.close();
    await env.cleanup();
  });

  async function deliverOne(): Promise<RecordedRequest> {
    const already = receiver.requests.length;
    await recordEvent(producer, 'post.created');
    return (await receiver.waitForRequests(already + 1))[already];
  }

  it('when an ed25519 endpoint gets a delivery, then it carries one v1a signature the public key verifies, and no X-Signature; after a rotation, both keys sign', async () => {
    const { endpoint, secret } = await createEndpoint(producer.db, { url: `${receiver.url}/ed`, userId: null, signatureScheme: 'ed25519' });
    expect(secret).toMatch(/^whpk_[A-Za-z0-9+/]{43}=$/);
    expect(endpoint).toMatchObject({ signature_scheme: 'ed25519', public_key: secret });
    const stored = await producer.db.models.WebhookEndpoint.findByPk(endpoint.id);
    expect(stored?.secret).toMatch(/^whsk_/);

    const request = await deliverOne();
    expect(request.headers['x-signature']).toBeUndefined();
    const entries = String(request.headers['webhook-signature']).split(' ');
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatch(/^v1a,/);
    expect(naclVerifies(request, entries[0], secret)).toBe(true);
    expect(verifyIncoming(request.body, request.headers, { secret }).event).toBe('post.created');

    const rotated = await rotateEndpointSecret(producer.db, endpoint.id, OPERATOR, { overlapHours: 1 });
    expect(rotated.secret).toMatch(/^whpk_/);
    expect(rotated.secret).not.toBe(secret);
    const after = await deliverOne();
    const [newer, older] = String(after.headers['webhook-signature']).split(' ');
    expect(naclVerifies(after, newer, rotated.secret)).toBe(true);
    expect(naclVerifies(after, older, secret)).toBe(true);
    expect(after.headers['x-signature']).toBeUndefined();
  });
});
