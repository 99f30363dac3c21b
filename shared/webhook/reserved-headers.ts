/**
 * Header names (lower case) only the sender and HTTP set on a delivery, written once (docs/design.md
 * §7, §14.1): the Standard Webhooks set; the headers HTTP owns for framing, routing and the
 * connection (RFC 9110 §7.6.1, RFC 9112 §6); and the egress proxy's credentials. An endpoint's
 * static headers naming one are refused (400), a delivery's own headers naming one are dropped
 * by the worker, and the library refuses one as a signature header's name. The hex signature
 * header is configurable, so each of them checks that name apart.
 */
export const RESERVED_HEADER_NAMES: ReadonlySet<string> = new Set([
  'host',
  'content-type',
  'content-length',
  'content-encoding',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authorization',
  'upgrade',
  'te',
  'trailer',
  'expect',
  'webhook-id',
  'webhook-timestamp',
  'webhook-signature',
]);
