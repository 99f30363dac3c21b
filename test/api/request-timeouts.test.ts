import { ApiClient, ApiHarness, createApiHarness } from './support/api-harness';
import { expectTrickleEndedBy408, idleAfterAnswer, sendInParts, trickle } from '../support/slow-client';

/**
 * docs/design.md "Servers and their limits": the api ends a request whose body has not
 * arrived within REQUEST_TIMEOUT_MS with 408, one whose headers are not complete within 10 s,
 * and closes a keep-alive connection idle for 5 s; the timeouts are checked every second.
 * Exercised over node:net on a real listening api, as a slow client would.
 */
describe('api request timeouts', () => {
  let harness: ApiHarness;
  /** REQUEST_TIMEOUT_MS 1500. */
  let short: ApiClient;
  /** The defaults (REQUEST_TIMEOUT_MS 30 000). */
  let defaults: ApiClient;
  const portOf = (api: ApiClient) => Number(new URL(api.baseUrl).port);

  beforeAll(async () => {
    harness = await createApiHarness({ RATE_LIMIT_PER_MIN: '0' });
    short = await harness.start('b', { requestTimeoutMs: 1_500 });
    defaults = await harness.start('b');
  });

  afterAll(() => harness.close());

  it('when a body trickles in a byte every 300 ms, then the api answers 408 and closes the connection within REQUEST_TIMEOUT_MS and a check', async () => {
    await expectTrickleEndedBy408(portOf(short), 'POST /api/v1/portal-sessions HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{"token":"');
  });

  it('when a request’s body is complete within REQUEST_TIMEOUT_MS, though sent in two parts, then it is answered as usual', async () => {
    const body = '{"token":"pl_not-a-link"}';
    const head = `POST /api/v1/portal-sessions HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`;
    const answer = await sendInParts(portOf(short), [head + body.slice(0, 10), body.slice(10)], 700);
    expect(answer).toMatch(/^HTTP\/1\.1 401 /);
  });

  it('when the headers never complete, then the api closes the connection within 10 s and a check', async () => {
    const exchange = await trickle(portOf(defaults), { head: 'GET /health HTTP/1.1\r\nHost: api\r\n', drip: 'X-Slow: 1\r\n', everyMs: 1_000, giveUpMs: 15_000 });
    expect(exchange.answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(exchange.closedAfterMs).not.toBeNull();
    expect(exchange.closedAfterMs).toBeGreaterThanOrEqual(9_900);
    expect(exchange.closedAfterMs).toBeLessThanOrEqual(11_500);
  }, 20_000);

  it('when a keep-alive connection stays idle after an answer, then the api closes it after 5 s', async () => {
    const exchange = await idleAfterAnswer(portOf(defaults), 'GET /health HTTP/1.1\r\nHost: api\r\n\r\n', 12_000);
    expect(exchange.answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(exchange.closedAfterMs).not.toBeNull();
    expect(exchange.closedAfterMs).toBeGreaterThanOrEqual(4_900);
    expect(exchange.closedAfterMs).toBeLessThanOrEqual(6_500);
  }, 15_000);
});
