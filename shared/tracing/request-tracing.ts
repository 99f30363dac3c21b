import { context, Context, propagation, ROOT_CONTEXT, Span, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { TRACER_NAME, tracingEnabled } from './index';

/**
 * One SERVER span per request (`<METHOD> <route>`, OpenTelemetry HTTP semantic conventions),
 * joining a caller's `traceparent` header when it sends one. The span's context is active
 * in the hooks and the handler, so what the request writes (delivery rows) is part of its
 * trace. Registers nothing while tracing is off.
 */
export const requestTracing = fp(
  async (app) => {
    if (!tracingEnabled()) return;
    const tracer = trace.getTracer(TRACER_NAME);
    const active = new WeakMap<FastifyRequest, { span: Span; context: Context }>();

    app.addHook('onRequest', (request, _reply, done) => {
      const parent = propagation.extract(ROOT_CONTEXT, request.headers);
      const route = request.routeOptions.url;
      const span = tracer.startSpan(
        route ? `${request.method} ${route}` : request.method,
        {
          kind: SpanKind.SERVER,
          attributes: {
            'http.request.method': request.method,
            'url.path': request.url.split('?')[0],
            ...(route ? { 'http.route': route } : {}),
          },
        },
        parent,
      );
      const spanContext = trace.setSpan(parent, span);
      active.set(request, { span, context: spanContext });
      context.with(spanContext, done);
    });
    // Content-type parsers run on the request stream's callbacks: enter the span's context again
    // before the handler, whatever a parser did.
    app.addHook('preHandler', (request, _reply, done) => {
      const entry = active.get(request);
      if (entry) context.with(entry.context, done);
      else done();
    });
    app.addHook('onError', async (request, _reply, error) => {
      active.get(request)?.span.recordException(error);
    });
    app.addHook('onResponse', async (request, reply) => {
      const entry = active.get(request);
      if (!entry) return;
      entry.span.setAttribute('http.response.status_code', reply.statusCode);
      if (reply.statusCode >= 500) entry.span.setStatus({ code: SpanStatusCode.ERROR });
      entry.span.end();
      active.delete(request);
    });
    app.addHook('onRequestAbort', async (request) => {
      active.get(request)?.span.end();
      active.delete(request);
    });
  },
  { name: 'request-tracing' },
);
