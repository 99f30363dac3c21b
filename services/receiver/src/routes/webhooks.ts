import type { FastifyError, FastifyPluginAsync } from 'fastify';
import { EncryptionError, type IncomingPolicy, type VerifiedWebhook } from '../../../../shared/webhook';
import { verifyWebhook, webhookRawBody } from '../../../../shared/webhook/fastify-webhook';
import { type UserEventDeps, applyUserEvent } from '../handlers/user-events';
import { processOnce } from '../inbox';

export interface WebhookRoutesOptions {
  /** The secrets senders may sign with (RECEIVER_SECRET): any one of them verifies a webhook. */
  secrets: readonly string[];
  /** Standard Webhooks timestamp window, seconds (RECEIVER_TOLERANCE_S). */
  toleranceS: number;
  /**
   * Accept deliveries that carry only X-Signature (RECEIVER_ACCEPT_X_SIGNATURE_ONLY); then every
   * accepted body is also deduped by its sha256. Default false: Standard Webhooks headers required.
   */
  acceptXSignatureOnly?: boolean;
  /** What the users handler works with, besides the database (see {@link applyUserEvent}). */
  users: Omit<UserEventDeps, 'sequelize' | 'log'>;
}

const ACCEPTED = { status: 'OK', message: 'Accepted' } as const;
const SERVER_ERROR = { status: 'ERROR', message: 'Server error' } as const;

/**
 * `POST /users` and `POST /posts` (mounted under `/webhooks`), docs/design.md §8: verify the
 * raw bytes (Standard Webhooks headers required, ±`toleranceS`; X-Signature alone only with
 * `acceptXSignatureOnly`), check the event family, dedupe by webhook-id in the inbox (and by
 * body hash with `acceptXSignatureOnly`), run the handler, answer 200
 * `{"status":"OK","message":"Accepted"}`. Every failure, a bad signature included, is the
 * spec's 500 `{"status":"ERROR","message":"Server error"}`; the reason is logged, never echoed.
 */
export const webhookRoutes: FastifyPluginAsync<WebhookRoutesOptions> = async (app, options) => {
  const { secrets, toleranceS, users } = options;
  const acceptXSignatureOnly = options.acceptXSignatureOnly ?? false;
  const policy = (event: string): IncomingPolicy => ({ secret: secrets, toleranceS, event, acceptXSignatureOnly });
  const inbox = { dedupeByBody: acceptXSignatureOnly };
  const userEvents: UserEventDeps = { ...users, sequelize: app.db.sequelize, log: app.log };
  await app.register(webhookRawBody);

  app.setErrorHandler((error: FastifyError, request, reply) => {
    const rejected = error instanceof EncryptionError || (error.statusCode !== undefined && error.statusCode < 500);
    const context = { err: error, webhookId: request.headers['webhook-id'], route: request.routeOptions.url };
    if (rejected) request.log.warn(context, 'webhook rejected');
    else request.log.error(context, 'webhook handler failed');
    return reply.code(500).send(SERVER_ERROR);
  });

  app.post('/users', { preHandler: verifyWebhook(policy('user.*')) }, async (request, reply) => {
    const webhook = request.webhook as VerifiedWebhook;
    let result: 'applied' | 'ignored' = 'ignored';
    const entry = { webhookId: webhook.id, topic: 'users', event: webhook.event, bodySha256: webhook.bodySha256 };
    const outcome = await processOnce(app.db.sequelize, entry, inbox, async (transaction) => {
      const applied = await applyUserEvent(userEvents, webhook.event, webhook.data, transaction);
      result = applied.result;
      return applied.afterCommit;
    });
    request.log.info({ webhookId: webhook.id, scheme: webhook.scheme, event: webhook.event, outcome, result }, 'user webhook accepted');
    return reply.code(200).send(ACCEPTED);
  });

  // The sink for the api's post events: verified, deduped and logged; nothing else to apply.
  app.post('/posts', { preHandler: verifyWebhook(policy('post.*')) }, async (request, reply) => {
    const webhook = request.webhook as VerifiedWebhook;
    const entry = { webhookId: webhook.id, topic: 'posts', event: webhook.event, bodySha256: webhook.bodySha256 };
    const outcome = await processOnce(app.db.sequelize, entry, inbox, async () => {});
    const pid = typeof webhook.data === 'object' && webhook.data !== null ? (webhook.data as { pid?: unknown }).pid : undefined;
    request.log.info({ webhookId: webhook.id, scheme: webhook.scheme, event: webhook.event, pid, outcome }, 'post webhook accepted');
    return reply.code(200).send(ACCEPTED);
  });
};
