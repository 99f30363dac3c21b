import type { FastifyBodyParser, FastifyRequest, preHandlerAsyncHookHandler } from 'fastify';
import fp from 'fastify-plugin';
import { EncryptionError } from './errors';
import { type IncomingPolicy, type VerifiedWebhook, verifyIncoming } from './verify-incoming';

declare module 'fastify' {
  interface FastifyRequest {
    /** The JSON body bytes exactly as received; null for other content types or no body. */
    rawBody: Buffer | null;
    /** Set by {@link verifyWebhook} once the webhook verified. */
    webhook: VerifiedWebhook | null;
  }
}

/**
 * Keeps the raw bytes of `application/json` bodies in `request.rawBody`, for the scope it is
 * registered in (register it inside the webhook routes' plugin, not at the root). The body
 * is still parsed by Fastify's own JSON parser, so the body limit and the `__proto__` /
 * `constructor` poisoning checks configured on the instance stay in force.
 */
export const webhookRawBody = fp(
  async (app) => {
    const parseJson = app.getDefaultJsonParser(
      app.initialConfig.onProtoPoisoning ?? 'error',
      app.initialConfig.onConstructorPoisoning ?? 'error',
    ) as unknown as FastifyBodyParser<Buffer>;
    app.decorateRequest('rawBody', null);
    app.decorateRequest('webhook', null);
    app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
      request.rawBody = body as Buffer;
      parseJson.call(app, request, body as Buffer, done);
    });
  },
  { name: 'webhook-raw-body', fastify: '5.x' },
);

/**
 * A preHandler that verifies the webhook over `request.rawBody` with {@link verifyIncoming}
 * (Standard Webhooks headers required unless `policy.acceptXSignatureOnly`; signable flag;
 * event pattern) and stores the result in `request.webhook`. Needs {@link webhookRawBody}.
 *
 * @throws EncryptionError (through Fastify's error handler) when anything does not verify,
 *   including a request without a JSON body
 */
export function verifyWebhook(policy: IncomingPolicy): preHandlerAsyncHookHandler {
  return async function verifyWebhookHook(request: FastifyRequest) {
    if (!request.rawBody) throw new EncryptionError('No JSON request body to verify.');
    request.webhook = verifyIncoming(request.rawBody, request.headers, policy);
  };
}
