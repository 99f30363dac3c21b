import type { Config } from '../../../shared/config';
import { RESERVED_HEADER_NAMES } from '../../../shared/webhook/reserved-headers';
import { deriveSecret, signedHeaders } from '../../../shared/webhook/signing';
import type { ClaimedDelivery } from './delivery-store';
import type { SignedMessage } from './destinations';

/**
 * The caller's own headers plus the signature set, signed now with the stable webhook-id. While
 * the endpoint's secret rotates, the previous secret adds a second `v1` entry after the current
 * one's (Standard Webhooks lets a receiver accept any listed signature); X-Signature has room
 * for one, so it uses the current secret. A delivery given its own secret is not the
 * endpoint's to rotate.
 *
 * @param body - the exact bytes that will be sent
 * @throws what shared/webhook's signing throws for an unusable secret
 */
export function signDelivery(delivery: ClaimedDelivery, body: Buffer, config: Pick<Config, 'appKey' | 'webhookSalt'>): Record<string, string> {
  const secret = delivery.secret ?? delivery.endpointSecret ?? deriveSecret(config.appKey, config.webhookSalt, delivery.algo);
  const previous = delivery.secret === null ? delivery.endpointPreviousSecret : null;
  const reserved = delivery.signatureHeader.toLowerCase();
  const own: Record<string, string> = {};
  for (const [name, value] of Object.entries(delivery.headers ?? {})) {
    const lower = name.toLowerCase();
    if (!RESERVED_HEADER_NAMES.has(lower) && lower !== reserved) own[name] = String(value);
  }
  return {
    ...own,
    ...signedHeaders({
      id: delivery.id,
      timestamp: Math.floor(Date.now() / 1000),
      body,
      secret,
      additionalSecrets: previous && previous !== secret ? [previous] : [],
      algo: delivery.algo,
      signatureHeader: delivery.signatureHeader,
    }),
  };
}

/**
 * The delivery as its destination sends it: its event's bytes, signed now ({@link signDelivery}),
 * for its endpoint's URL as claimed and with its endpoint's credentials.
 *
 * @param bytes - the event's body (docs/design.md §3), sent as UTF-8
 * @throws what {@link signDelivery} throws
 */
export function signedMessageOf(delivery: ClaimedDelivery, bytes: string, config: Pick<Config, 'appKey' | 'webhookSalt'>): SignedMessage {
  const body = Buffer.from(bytes, 'utf8');
  return {
    webhookId: delivery.id,
    url: delivery.url,
    method: delivery.method,
    headers: signDelivery(delivery, body, config),
    body,
    endpoint: { id: delivery.endpointId, auth: delivery.auth, clientCertificate: delivery.clientCertificate },
  };
}
