import { lookup } from 'node:dns/promises';
import type { Config } from '../../shared/config';
import { createHttpSender } from '../../services/webhook-worker/src/destinations/http/http-sender';
import { createPrivateAllowlist, isNonPublicAddress } from '../../services/webhook-worker/src/destinations/http/ssrf-guard';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { RecordingServer, startRecordingServer } from '../support/recording-server';
import { addEndpoint, createProducer, deliveryRows, Producer, recordEvent, resetAndClose, startWorker } from './support/harness';
import { waitFor } from '../support/wait-for';

describe('SSRF guard: addresses that embed or stand for IPv4 ones', () => {
  it.each([
    ['64:ff9b::7f00:1', 'NAT64 of 127.0.0.1'],
    ['64:ff9b::10.0.0.1', 'NAT64 of 10.0.0.1'],
    ['64:ff9b::a9fe:a9fe', 'NAT64 of 169.254.169.254 (cloud metadata)'],
    ['64:ff9b:1::a00:1', 'local-use NAT64 64:ff9b:1::/48'],
    ['64:ff9b:1:ffff::1', 'local-use NAT64, any layout'],
    ['2002:7f00:1::', '6to4 of 127.0.0.1'],
    ['2002:5db8:d70e::1', '6to4 of a public address (6to4 is deprecated, refused whole)'],
    ['::127.0.0.1', 'IPv4-compatible 127.0.0.1'],
    ['::10.1.2.3', 'IPv4-compatible 10.1.2.3'],
    ['::5db8:d70e', 'IPv4-compatible public address (deprecated form, refused whole)'],
    ['::ffff:0:7f00:1', 'IPv4-translated 127.0.0.1'],
    ['::ffff:10.0.0.1', 'IPv4-mapped 10.0.0.1'],
    ['fec0::1', 'site-local'],
    ['feff:ffff::1', 'site-local, top of the range'],
    ['2001:0:4136:e378::1', 'Teredo'],
    ['2001:db8::1', 'documentation'],
    ['100::1', 'discard-only'],
    ['100:0:0:1::1', 'dummy IPv6 prefix'],
    ['2001:2::1', 'benchmarking'],
    ['2001:2:0:ffff::1', 'benchmarking, top of the range'],
    ['2001:10::1', 'ORCHID (deprecated)'],
    ['2001:1f:ffff::1', 'ORCHID, top of the range'],
    ['2001:20::1', 'ORCHIDv2'],
    ['2001:2f:ffff::1', 'ORCHIDv2, top of the range'],
    ['3fff::1', 'documentation 3fff::/20'],
    ['3fff:fff::1', 'documentation 3fff::/20, top of the range'],
    ['5f00::1', 'SRv6 SIDs'],
    ['5f00:ffff::1', 'SRv6 SIDs, top of the range'],
    ['192.0.2.1', 'TEST-NET-1'],
  ])('when the address is %s (%s), then it is refused', (address) => {
    expect(isNonPublicAddress(address)).toBe(true);
  });

  it.each([
    ['64:ff9b::5db8:d70e', 'NAT64 of the public 93.184.215.14 (IPv6-only networks with DNS64 reach every IPv4 receiver so)'],
    ['64:ff9b::93.184.215.14', 'the same, dotted'],
    ['::ffff:93.184.215.14', 'IPv4-mapped public address'],
    ['2606:4700::1111', 'global unicast'],
    ['2a00:1450:4001::200e', 'global unicast'],
    ['2001:3::1', 'AMT, globally reachable'],
    ['2001:4:112::1', 'AS112-v6, globally reachable'],
    ['2001:30::1', 'drone remote ID tags, beside ORCHIDv2'],
    ['2001:2:1::1', 'just past benchmarking'],
    ['3fff:1000::1', 'just past documentation 3fff::/20'],
    ['1.1.1.1', 'public IPv4'],
  ])('when the address is %s (%s), then it is public', (address) => {
    expect(isNonPublicAddress(address)).toBe(false);
  });
});

describe('WEBHOOK_PRIVATE_ALLOWLIST entries', () => {
  const allowlist = createPrivateAllowlist(['receiver', 'hooks.internal.example', '10.20.0.0/16', 'fd00:1::/32', '192.168.7.7']);

  it('when a hostname is listed, then only that exact host matches (case-insensitive), never a suffix or a parent', () => {
    expect(allowlist.allowsHost('receiver')).toBe(true);
    expect(allowlist.allowsHost('RECEIVER')).toBe(true);
    expect(allowlist.allowsHost('hooks.internal.example')).toBe(true);
    expect(allowlist.allowsHost('evil.receiver')).toBe(false);
    expect(allowlist.allowsHost('receiver.evil.example')).toBe(false);
    expect(allowlist.allowsHost('internal.example')).toBe(false);
  });

  it('when a CIDR or a bare address is listed, then addresses inside it match and others do not', () => {
    expect(allowlist.allowsAddress('10.20.3.4')).toBe(true);
    expect(allowlist.allowsAddress('10.21.0.1')).toBe(false);
    expect(allowlist.allowsAddress('fd00:1:2::3')).toBe(true);
    expect(allowlist.allowsAddress('fd00:2::3')).toBe(false);
    expect(allowlist.allowsAddress('192.168.7.7')).toBe(true);
    expect(allowlist.allowsAddress('192.168.7.8')).toBe(false);
  });
});

describe('SSRF guard in the HTTP sender', () => {
  let peer: RecordingServer;

  beforeEach(async () => {
    peer = await startRecordingServer();
  });

  afterEach(async () => {
    await peer.close();
  });

  const send = async (url: string, privateAllowlist: string[] = [], blockPrivate = true) => {
    const warnings: object[] = [];
    const sender = createHttpSender({
      timeoutMs: 2_000,
      blockPrivate,
      privateAllowlist,
      maxSockets: 2,
      logger: { warn: (details) => warnings.push(details) },
    });
    try {
      return { result: await sender.send({ url, method: 'POST', body: Buffer.from('{}'), headers: { 'Content-Type': 'application/json' } }), warnings };
    } finally {
      sender.close();
    }
  };

  it('when the target is a private literal outside the allowlist, then nothing is sent, the reason does not name the address, and the log has it', async () => {
    const { result, warnings } = await send(`http://[::ffff:127.0.0.1]:${peer.port}/x`, ['10.0.0.0/8']);
    expect(result).toMatchObject({ blocked: true, statusCode: null });
    expect(result.error).toBe('Refused to deliver to [::ffff:7f00:1]: it resolves to a non-public address (SSRF guard).');
    expect(warnings).toEqual([expect.objectContaining({ address: '::ffff:7f00:1' })]);
    expect(peer.requests).toHaveLength(0);
  });

  it('when an allowlisted host refuses the connection, then the reason names the host and port, not the address it resolved to', async () => {
    const port = peer.port;
    await peer.close();
    const { result } = await send(`http://localhost:${port}/x`, ['localhost']);
    expect(result.error).toBe(`ECONNREFUSED: connect ECONNREFUSED localhost:${port}`);
    const unguarded = await send(`http://localhost:${port}/x`, [], false);
    expect(unguarded.result.error).toBe(`ECONNREFUSED: connect ECONNREFUSED localhost:${port}`);
    peer = await startRecordingServer();
  });

  it.each(['2001:2::1', '2001:10::1', '2001:20::1', '5f00::1', '3fff::1'])(
    'when the target is the literal [%s] of a range not globally reachable, then nothing is sent, and the log shows the URL without its query',
    async (address) => {
      const { result, warnings } = await send(`http://[${address}]:${peer.port}/x?token=SECRET`);
      expect(result).toMatchObject({ blocked: true, statusCode: null });
      expect(result.error).toMatch(/SSRF guard/);
      expect(warnings).toEqual([expect.objectContaining({ url: `http://[${address}]:${peer.port}/x` })]);
      expect(peer.requests).toHaveLength(0);
    },
  );

  it('when a listed CIDR holds the literal address, then the request goes through with the guard on', async () => {
    const { result } = await send(`http://127.0.0.1:${peer.port}/x`, ['127.0.0.0/8']);
    expect(result).toMatchObject({ blocked: false, statusCode: 200 });
    expect(peer.requests).toHaveLength(1);
  });

  it('when a listed CIDR holds the address a name resolves to, then the request goes through', async () => {
    const resolved = await lookup('localhost', { all: true });
    const { result } = await send(`http://localhost:${peer.port}/x`, resolved.map((entry) => `${entry.address}/${entry.family === 4 ? 32 : 128}`));
    expect(result).toMatchObject({ blocked: false, statusCode: 200 });
  });
});

describe('webhook worker: SSRF guard on, WEBHOOK_PRIVATE_ALLOWLIST', () => {
  let env: TestEnvironment;
  let producer: Producer;
  let peer: RecordingServer;
  let running: ReturnType<typeof startWorker> | undefined;

  beforeAll(async () => {
    env = await createTestEnvironment({ WEBHOOK_RETRY_SCHEDULE: '0.05', WEBHOOK_BLOCK_PRIVATE: 'true' }, 'worker');
  });

  beforeEach(async () => {
    producer = createProducer(env.config);
    await producer.queue.waitUntilReady();
    peer = await startRecordingServer();
  });

  afterEach(async () => {
    await running?.close();
    running = undefined;
    await resetAndClose(producer);
    await peer.close();
  });

  afterAll(async () => {
    await env.cleanup();
  });

  const run = (overrides: Partial<Config>) => {
    running = startWorker({ ...env.config, ...overrides }, producer.db);
  };

  it('when the endpoint is an allowlisted hostname (localhost) that resolves to 127.0.0.1, then it is delivered with the guard on', async () => {
    await addEndpoint(producer.db, `http://localhost:${peer.port}/internal`);
    run({ webhookPrivateAllowlist: ['localhost'] });

    await recordEvent(producer, 'post.created');

    const [request] = await peer.waitForRequests(1);
    expect(request.path).toBe('/internal');
    await waitFor(async () => (await deliveryRows(producer.db))[0]?.status === 'succeeded', 5_000, 'succeeded');
  });

  it('when the endpoint resolves to a private address and is not allowlisted, then it fails at once and last_error names the host, not the address', async () => {
    await addEndpoint(producer.db, `http://localhost:${peer.port}/internal`);
    run({ webhookPrivateAllowlist: ['receiver', '10.0.0.0/8'] });

    await recordEvent(producer, 'post.created');

    const [delivery] = await waitFor(async () => {
      const rows = await deliveryRows(producer.db);
      return rows[0]?.status === 'failed' && rows;
    });
    expect(delivery.attempts).toBe(1);
    expect(delivery.lastError).toBe('Refused to deliver to localhost: it resolves to a non-public address (SSRF guard).');
    expect(peer.requests).toHaveLength(0);
  });
});
