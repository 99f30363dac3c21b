import type { FastifyError, FastifyPluginAsync } from 'fastify';
import { EncryptionError, type VerifiedWebhook } from '../../../../shared/webhook';
import { verifyWebhook, webhookRawBody } from '../../../../shared/webhook/fastify-webhook';
import { applyUserEvent } from '../handlers/user-events';
import { processOnce } from '../inbox';

export interface WebhookRoutesOptions {
  /** The secrets senders may sign with (RECEIVER_SECRET): any one of them verifies a webhook. */
  secrets: readonly string[];
  /** Standard Webhooks timestamp window, seconds (RECEIVER_TOLERANCE_S). */
  toleranceS: number;
}

const ACCEPTED = { status: 'OK', message: 'Accepted' } as const;
const SERVER_ERROR = { status: 'ERROR', message: 'Server error' } as const;

/**
 * `POST /users` and `POST /posts` (mounted under `/webhooks`), DESIGN §8: verify the raw
 * bytes, check the event family, dedupe by webhook-id in the inbox, run the handler, answer
 * 200 `{"status":"OK","message":"Accepted"}`. Every failure, a bad signature included, is the
 * spec's 500 `{"status":"ERROR","message":"Server error"}`; the reason is logged, never echoed.
 */
export const webhookRoutes: FastifyPluginAsync<WebhookRoutesOptions> = async (app, { secrets, toleranceS }) => {
  await app.register(webhookRawBody);

  app.setErrorHandler((error: FastifyError, request, reply) => {
    const rejected = error instanceof EncryptionError || (error.statusCode !== undefined && error.statusCode < 500);
    const context = { err: error, webhookId: request.headers['webhook-id'], route: request.routeOptions.url };
    if (rejected) request.log.warn(context, 'webhook rejected');
    else request.log.error(context, 'webhook handler failed');
    return reply.code(500).send(SERVER_ERROR);
  });

  app.post('/users', { preHandler: verifyWebhook({ secret: secrets, toleranceS, event: 'user.*' }) }, async (request, reply) => {
    const webhook = request.webhook as VerifiedWebhook;
    let result: 'applied' | 'ignored' = 'ignored';
    const outcome = await processOnce(app.db.sequelize, { webhookId: webhook.id, topic: 'users', event: webhook.event }, async (transaction) => {
      result = await applyUserEvent(app.db.sequelize, webhook.event, webhook.data, transaction);
    });
    request.log.info({ webhookId: webhook.id, event: webhook.event, outcome, result }, 'user webhook accepted');
    return reply.code(200).send(ACCEPTED);
  });

  // The sink for the api's post events: verified, deduped and logged; nothing else to apply.
  app.post('/posts', { preHandler: verifyWebhook({ secret: secrets, toleranceS, event: 'post.*' }) }, async (request, reply) => {
    const webhook = request.webhook as VerifiedWebhook;
    const outcome = await processOnce(app.db.sequelize, { webhookId: webhook.id, topic: 'posts', event: webhook.event }, async () => {});
    const pid = typeof webhook.data === 'object' && webhook.data !== null ? (webhook.data as { pid?: unknown }).pid : undefined;
    request.log.info({ webhookId: webhook.id, event: webhook.event, pid, outcome }, 'post webhook accepted');
    return reply.code(200).send(ACCEPTED);
  });
};
