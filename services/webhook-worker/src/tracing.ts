import { DelayedError, Job } from 'bullmq';
import { QueryTypes, Sequelize } from 'sequelize';
import { findById, keyOfId } from '../../../shared/db/partitions';
import type { WebhookJobData } from '../../../shared/queue';
import { contextFromTraceparent, inSpan, SpanKind, SpanStatusCode, tracingEnabled, WEBHOOK_ID } from '../../../shared/tracing';
import type { HttpSender } from './destinations/http/http-sender';

type Processor<J extends Job<WebhookJobData>> = (job: J, token?: string) => Promise<void>;

/**
 * With tracing on, runs each job inside a CONSUMER span `<queue> process` (`webhooks process`,
 * or the partition's queue name such as `{webhooks-3} process`; OpenTelemetry
 * messaging conventions) whose parent is the delivery row's `traceparent`: the trace of the
 * api request that wrote the delivery, however often the job was lost and queued again.
 * With tracing off, returns `processor` itself.
 */
export function traceDeliveryJobs<J extends Job<WebhookJobData>>(processor: Processor<J>, sequelize: Sequelize): Processor<J> {
  if (!tracingEnabled()) return processor;
  return async (job, token) => {
    // An unreachable database is the processor's to handle (it backs off without using an
    // attempt); the span then starts a trace of its own rather than failing the job here.
    const traceparent = await findById(job.data.deliveryId, (key) =>
      sequelize.query<{ traceparent: string | null }>(`SELECT traceparent FROM webhook_deliveries WHERE id = $1 AND ${keyOfId('created_at', '$2')}`, {
        bind: [job.data.deliveryId, key],
        type: QueryTypes.SELECT,
      }),
    ).then((rows) => rows[0]?.traceparent ?? null, () => null);
    const attributes = {
      [WEBHOOK_ID]: job.data.deliveryId,
      'messaging.system': 'bullmq',
      'messaging.operation.type': 'process',
      'messaging.destination.name': job.queueName,
      'messaging.message.id': job.id ?? job.data.deliveryId,
    };
    return inSpan(
      `${job.queueName} process`,
      // A postponed attempt (DelayedError) is BullMQ's retry signal, not a failed job.
      { kind: SpanKind.CONSUMER, attributes, parent: contextFromTraceparent(traceparent), isFailure: (error) => !(error instanceof DelayedError) },
      () => processor(job, token),
    );
  };
}

/**
 * With tracing on, wraps each HTTP attempt in a CLIENT span `<METHOD>` (OpenTelemetry HTTP
 * conventions) carrying `webhook.id` (from the signed `webhook-id` header; none for an OAuth2
 * token request), the target
 * without its query string (which may hold a token) and the answer's status. An attempt that
 * got no answer (timeout, refused target) is marked failed with the reason.
 */
export function traceAttempts(sender: HttpSender): HttpSender {
  if (!tracingEnabled()) return sender;
  return {
    close: () => sender.close(),
    send: (request) => {
      const url = new URL(request.url);
      const webhookId = request.headers['webhook-id'];
      const attributes = {
        // A token request (docs/design.md §14.4, auth) carries no webhook-id.
        ...(webhookId === undefined ? {} : { [WEBHOOK_ID]: webhookId }),
        'http.request.method': request.method,
        'url.full': `${url.protocol}//${url.host}${url.pathname}`,
        'server.address': url.hostname,
        'server.port': Number(url.port) || (url.protocol === 'https:' ? 443 : 80),
      };
      return inSpan(request.method, { kind: SpanKind.CLIENT, attributes }, async (span) => {
        const result = await sender.send(request);
        if (result.statusCode !== null) span.setAttribute('http.response.status_code', result.statusCode);
        if (result.error !== null) span.setStatus({ code: SpanStatusCode.ERROR, message: result.error });
        else if (result.statusCode !== null && result.statusCode >= 400) span.setStatus({ code: SpanStatusCode.ERROR });
        return result;
      });
    },
  };
}
