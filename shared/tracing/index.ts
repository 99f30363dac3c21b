import { Attributes, context, Context, propagation, ROOT_CONTEXT, Span, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { SpanProcessor } from '@opentelemetry/sdk-trace-base';

/**
 * OpenTelemetry tracing (docs/design.md §12.2): one trace per api request that writes deliveries,
 * carried through each delivery row (`webhook_deliveries.traceparent`, W3C Trace Context) to
 * the worker's job and HTTP attempt spans. Off unless started: then every helper here
 * returns at once, and the SDK is not even loaded.
 *
 * Attributes of ours: `webhook.id` (the delivery id, also the `webhook-id` header),
 * `webhook.event`, `webhook.ids` (a request's new deliveries). The rest follow OpenTelemetry's
 * HTTP and messaging semantic conventions.
 */

/** The instrumentation scope of every span this system makes. */
export const TRACER_NAME = 'posts-webhooks';

/** Attribute names of ours, beside the semantic conventions. */
export const WEBHOOK_ID = 'webhook.id';
export const WEBHOOK_IDS = 'webhook.ids';
export const WEBHOOK_EVENT = 'webhook.event';

let enabled = false;

/** A started tracer provider. */
export interface Tracing {
  /** Exports what is buffered, then unregisters the provider (tracing is off again). */
  shutdown(): Promise<void>;
}

/** Options of {@link startTracing}. */
export interface TracingOptions {
  /** `service.name` of the spans, e.g. `api` or `webhook-worker`. */
  serviceName: string;
  /**
   * OTEL_EXPORTER_OTLP_ENDPOINT: base URL of an OTLP/HTTP collector; spans go to
   * `<endpoint>/v1/traces` (OTLP specification, "OTLP/HTTP"), in batches.
   */
  endpoint?: string;
  /** Instead of the OTLP exporter, e.g. a SimpleSpanProcessor over an InMemorySpanExporter in tests. */
  spanProcessors?: SpanProcessor[];
}

/**
 * Registers a global tracer provider with the W3C Trace Context propagator and an
 * AsyncLocalStorage context manager, exporting to `endpoint` or `spanProcessors`.
 *
 * @returns undefined, and tracing stays off, when neither is given
 */
export async function startTracing(options: TracingOptions): Promise<Tracing | undefined> {
  if (!options.spanProcessors && !options.endpoint) return undefined;
  const { NodeTracerProvider } = await import('@opentelemetry/sdk-trace-node');
  const { resourceFromAttributes } = await import('@opentelemetry/resources');
  let processors = options.spanProcessors;
  if (!processors) {
    const { BatchSpanProcessor } = await import('@opentelemetry/sdk-trace-base');
    const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-http');
    processors = [new BatchSpanProcessor(new OTLPTraceExporter({ url: `${String(options.endpoint).replace(/\/+$/, '')}/v1/traces` }))];
  }
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ 'service.name': options.serviceName }),
    spanProcessors: processors,
  });
  provider.register();
  enabled = true;
  return {
    async shutdown() {
      enabled = false;
      await provider.shutdown();
      trace.disable();
      context.disable();
      propagation.disable();
    },
  };
}

/** True while a provider from {@link startTracing} is registered. */
export function tracingEnabled(): boolean {
  return enabled;
}

/**
 * The active span's context as a W3C `traceparent` header value, for a delivery row.
 * Null when tracing is off or no span is active.
 */
export function activeTraceparent(): string | null {
  if (!enabled) return null;
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return carrier.traceparent ?? null;
}

/** Sets attributes on the active span, if any (e.g. the `webhook.ids` a request wrote). */
export function annotateActiveSpan(attributes: Attributes): void {
  if (enabled) trace.getActiveSpan()?.setAttributes(attributes);
}

/** A context whose parent is `traceparent` (W3C Trace Context), or the root context when it is null or malformed. */
export function contextFromTraceparent(traceparent: string | null | undefined): Context {
  return traceparent ? propagation.extract(ROOT_CONTEXT, { traceparent }) : ROOT_CONTEXT;
}

/**
 * Runs `work` inside a new span (child of `parent`, default the active context) and ends it
 * when `work` settles; a thrown error is recorded and marks the span failed, unless
 * `isFailure(error)` says it is not one (e.g. a retry signal), then rethrown.
 */
export async function inSpan<T>(
  name: string,
  options: { kind: SpanKind; attributes?: Attributes; parent?: Context; isFailure?: (error: unknown) => boolean },
  work: (span: Span) => Promise<T>,
): Promise<T> {
  const tracer = trace.getTracer(TRACER_NAME);
  const span = tracer.startSpan(name, { kind: options.kind, attributes: options.attributes }, options.parent ?? context.active());
  try {
    return await context.with(trace.setSpan(options.parent ?? context.active(), span), () => work(span));
  } catch (error) {
    if (options.isFailure?.(error) ?? true) {
      span.recordException(error as Error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).message });
    }
    throw error;
  } finally {
    span.end();
  }
}

export { SpanKind, SpanStatusCode };
