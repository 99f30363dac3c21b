import { createHash } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import type { ClientCertificate } from './client-certificate-agents';
import type { EndpointAuth } from '../../../../../shared/db';
import type { HttpSender, OutgoingRequest, SendResult } from './http-sender';
import type { OAuth2Tokens } from './oauth2-tokens';

export interface AuthorizedSendOptions {
  sender: HttpSender;
  tokens: OAuth2Tokens;
  /** The whole attempt's bound, token requests and a resend included, ms (WEBHOOK_TIMEOUT_MS). */
  timeoutMs: number;
}

/** Whose credentials a request carries: its endpoint's (none for an ad-hoc send, `endpointId` null). */
export interface CredentialsOf {
  endpointId: number | null;
  /** The URL the request goes to, which the credentials were given for. */
  url: string;
  auth: EndpointAuth | null;
  clientCertificate: { cert: string; key: string } | null;
}

/**
 * Sends a delivery's request with its endpoint's credentials (docs/design.md §14.4).
 *
 * @param resendSlot - waits for the endpoint's rate limit to admit one more request (a resend after 401)
 */
export type AuthorizedSend = (delivery: CredentialsOf, request: OutgoingRequest, resendSlot: () => Promise<void>, log: Logger) => Promise<SendResult>;

/**
 * The request goes to the endpoint's URL as claimed (its current one, docs/design.md §6.3), so the
 * endpoint's credentials go with it: they were given for that URL.
 *
 * With `auth`, the request carries `Authorization: Bearer <token>` (the cached token, or one
 * fetched now; a token that cannot be had is the attempt's result, `oauth2 token: ...`). A 401
 * from the endpoint drops that token, fetches a new one and sends once more in the same
 * attempt, after a rate slot, if time is left. With a client certificate, an https request
 * presents it, from a pool of the endpoint and certificate. The result's duration is the
 * whole attempt's.
 */
export function createAuthorizedSend(options: AuthorizedSendOptions): AuthorizedSend {
  const { sender, tokens, timeoutMs } = options;

  return async function authorizedSend(delivery, request, resendSlot, log) {
    const started = performance.now();
    const deadline = started + timeoutMs;
    const endpointId = delivery.endpointId;
    if (endpointId === null) return sender.send(request);
    // Its credentials changed to none: a token cached for the old ones is of no more use.
    if (!delivery.auth) tokens.forget(endpointId);
    if (!delivery.auth && !delivery.clientCertificate) return sender.send(request);
    const certificate = delivery.clientCertificate && clientCertificateOf(endpointId, delivery.clientCertificate);
    const outgoing = { ...request, deadline, ...(certificate ? { clientCertificate: certificate } : {}) };
    const { auth } = delivery;
    if (!auth) return sender.send(outgoing);
    const finish = (result: SendResult): SendResult => ({ ...result, durationMs: Math.round(performance.now() - started) });
    const version = `${delivery.url}\n${certificate?.pool ?? ''}`;
    const bearer = (token: string) => ({ ...outgoing, headers: { ...outgoing.headers, authorization: `Bearer ${token}` } });

    const first = await tokens.get(endpointId, auth, version, deadline);
    if (!first.ok) return finish(first.result);
    const answered = await sender.send(bearer(first.token));
    if (answered.statusCode !== 401) return finish(answered);
    tokens.drop(endpointId, first.token);
    const fresh = await tokens.get(endpointId, auth, version, deadline);
    if (!fresh.ok) return finish(fresh.result);
    await resendSlot();
    if (performance.now() >= deadline) return finish(answered);
    log.debug({ endpointId }, 'endpoint answered 401; sending again with a fresh token');
    return finish(await sender.send(bearer(fresh.token)));
  };
}

/** The endpoint's certificate with its pool: `<endpoint id>:<sha256 of certificate and key>`. */
function clientCertificateOf(endpointId: number, pem: { cert: string; key: string }): ClientCertificate {
  const fingerprint = createHash('sha256').update(pem.cert).update('\0').update(pem.key).digest('base64url');
  return { ...pem, pool: `${endpointId}:${fingerprint}` };
}
