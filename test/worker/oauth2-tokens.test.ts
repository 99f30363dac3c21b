import { performance } from 'node:perf_hooks';
import { createAuthorizedSend } from '../../services/webhook-worker/src/destinations/http/authorized-send';
import type { ClaimedDelivery } from '../../services/webhook-worker/src/delivery-store';
import { createHttpSender, type HttpSender } from '../../services/webhook-worker/src/destinations/http/http-sender';
import { createOAuth2Tokens } from '../../services/webhook-worker/src/destinations/http/oauth2-tokens';
import type { EndpointAuth } from '../../shared/db';
import { RecordingServer, startRecordingServer } from '../support/recording-server';
import { TokenServer, startTokenServer } from '../support/token-server';
import { silentLogger } from './support/harness';

const CLIENT = { id: 'worker-client', secret: 'client-secret-value' };

/**
 * docs/design.md §14.4: the worker's OAuth2 token cache holds nothing for endpoints that
 * no longer need it (deleted, disabled, moved, or without `auth` now), against a real token
 * server and receiver on 127.0.0.1.
 */
describe('webhook worker: the OAuth2 token cache evicts what no endpoint uses', () => {
  let tokenServer: TokenServer;
  let receiver: RecordingServer;
  let sender: HttpSender;

  beforeEach(async () => {
    tokenServer = await startTokenServer(CLIENT, { expiresIn: 1 });
    receiver = await startRecordingServer({ status: 204 });
    sender = createHttpSender({ timeoutMs: 5_000, blockPrivate: false, maxSockets: 4 });
  });

  afterEach(async () => {
    sender.close();
    await Promise.all([tokenServer.close(), receiver.close()]);
  });

  const authOf = (): EndpointAuth => ({ type: 'oauth2_client_credentials', token_url: tokenServer.url, client_id: CLIENT.id, client_secret: CLIENT.secret });
  const deadline = () => performance.now() + 5_000;

  it('when tokens of endpoints that make no more attempts (deleted, say) expire, then their entries are swept out', async () => {
    const tokens = createOAuth2Tokens({ sender, timeoutMs: 5_000, sweepEveryMs: 0 });
    for (const endpointId of [1, 2, 3]) expect((await tokens.get(endpointId, authOf(), 'v', deadline())).ok).toBe(true);
    expect(tokens.size).toBe(3);

    // expires_in 1 s: each is kept max(1 s - 30 s, 0.5 s).
    await new Promise((resolve) => setTimeout(resolve, 600));

    expect(tokens.size).toBe(0);
  });

  it('when an endpoint’s next attempt has no auth any more (credentials removed, or moved without them), then its cached token is evicted', async () => {
    const tokens = createOAuth2Tokens({ sender, timeoutMs: 5_000 });
    const send = createAuthorizedSend({ sender, tokens, timeoutMs: 5_000 });
    const delivery = {
      id: 'msg_test',
      endpointId: 7,
      url: `${receiver.url}/hooks`,
      auth: authOf(),
      clientCertificate: null,
    } as unknown as ClaimedDelivery;
    const request = { url: delivery.url, method: 'POST', body: Buffer.from('{}'), headers: { 'content-type': 'application/json' } };
    const noSlot = async () => undefined;

    expect((await send(delivery, request, noSlot, silentLogger)).statusCode).toBe(204);
    expect(tokens.size).toBe(1);

    expect((await send({ ...delivery, auth: null }, request, noSlot, silentLogger)).statusCode).toBe(204);

    expect(tokens.size).toBe(0);
    expect(receiver.requests[1].headers.authorization).toBeUndefined();
  });

  it('when an endpoint’s credentials or URL change, then its token for the old ones is replaced, not kept beside the new one', async () => {
    const tokens = createOAuth2Tokens({ sender, timeoutMs: 5_000 });
    const first = await tokens.get(9, authOf(), 'https://a.example/hooks', deadline());
    const moved = await tokens.get(9, authOf(), 'https://b.example/hooks', deadline());
    const rotated = await tokens.get(9, { ...authOf(), scope: 'webhooks' }, 'https://b.example/hooks', deadline());

    expect([first.ok, moved.ok, rotated.ok]).toEqual([true, true, true]);
    expect(tokenServer.requests).toHaveLength(3);
    expect(tokens.size).toBe(1);
  });
});
