import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { buildApp as buildReceiver } from '../../services/receiver/src/app';
import { createTestEnvironment, TestEnvironment } from '../support/environment';
import { expectTrickleEndedBy408, idleAfterAnswer, sendInParts } from '../support/slow-client';

const SECRET = 'whsec_cmVjZWl2ZXItdGltZW91dHMtdGVzdC1zZWNyZXQ=';

/**
 * docs/design.md "Servers and their limits", on the receiver: a webhook whose body has not
 * arrived within REQUEST_TIMEOUT_MS is answered 408 and its connection closed; a keep-alive
 * connection idle for 5 s is closed. Exercised over node:net on a real listening receiver.
 */
describe('receiver request timeouts', () => {
  let env: TestEnvironment;
  let receiver: FastifyInstance;
  let port: number;

  beforeAll(async () => {
    env = await createTestEnvironment({ RECEIVER_SECRET: SECRET, REQUEST_TIMEOUT_MS: '1500' }, 'receiver');
    receiver = await buildReceiver(env.config);
    await receiver.listen({ host: '127.0.0.1', port: 0 });
    port = (receiver.server.address() as AddressInfo).port;
  });

  afterAll(async () => {
    await receiver?.close();
    await env?.cleanup();
  });

  it('when a webhook’s body trickles in a byte every 300 ms, then the receiver answers 408 and closes the connection within REQUEST_TIMEOUT_MS and a check', async () => {
    await expectTrickleEndedBy408(port, 'POST /webhooks/users HTTP/1.1\r\nHost: receiver\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{"type":"');
  });

  it('when a webhook’s body is complete within REQUEST_TIMEOUT_MS, though sent in two parts, then it is answered as usual', async () => {
    const body = '{"type":"user.deleted","data":{"user_id":1}}';
    const head = `POST /webhooks/users HTTP/1.1\r\nHost: receiver\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`;
    // Unsigned: the receiver's answer to any failure (docs/design.md §8), not a timeout.
    const answer = await sendInParts(port, [head + body.slice(0, 10), body.slice(10)], 700);
    expect(answer).toMatch(/^HTTP\/1\.1 500 /);
    expect(answer).toContain('{"status":"ERROR","message":"Server error"}');
  });

  it('when a keep-alive connection stays idle after an answer, then the receiver closes it after 5 s', async () => {
    const exchange = await idleAfterAnswer(port, 'GET /health HTTP/1.1\r\nHost: receiver\r\n\r\n', 12_000);
    expect(exchange.answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(exchange.closedAfterMs).not.toBeNull();
    expect(exchange.closedAfterMs).toBeGreaterThanOrEqual(4_900);
    expect(exchange.closedAfterMs).toBeLessThanOrEqual(6_500);
  }, 15_000);
});
