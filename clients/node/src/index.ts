import createFetchClient, { type Client } from 'openapi-fetch';
import { fetchWithRetries, type RetryOptions } from './retry';
import type { paths } from './schema';

export type { paths } from './schema';
export type { RetryOptions } from './retry';

type Json<T> = T extends { content: { 'application/json': infer J } } ? J : never;
type Body<P extends keyof paths, M extends 'post' | 'patch'> = paths[P][M] extends { requestBody?: infer B } ? Json<NonNullable<B>> : never;
type Answer<P extends keyof paths, M extends 'get' | 'post' | 'patch', S extends number> = paths[P][M] extends { responses: infer R }
  ? S extends keyof R
    ? Json<R[S]>
    : never
  : never;

/** `POST /api/v1/webhooks`: one signed webhook to a URL. */
export type SendWebhookInput = Body<'/api/v1/webhooks', 'post'>;
/** `POST /api/v1/events`: an event of the catalog, fanned out to the subscribed endpoints. */
export type PublishEventInput = Body<'/api/v1/events', 'post'>;
export type DeliveryPage = Answer<'/api/v1/webhooks', 'get', 200>;
export type Delivery = Answer<'/api/v1/webhooks/{id}', 'get', 200>;
export type ListDeliveriesQuery = NonNullable<paths['/api/v1/webhooks']['get']['parameters']['query']>;
export type CreateEndpointInput = Body<'/api/v1/endpoints', 'post'>;
export type CreatedEndpoint = Answer<'/api/v1/endpoints', 'post', 201>;
export type UpdateEndpointInput = Body<'/api/v1/endpoints/{id}', 'patch'>;
export type Endpoint = Answer<'/api/v1/endpoints/{id}', 'get', 200>;
export type EndpointPage = Answer<'/api/v1/endpoints', 'get', 200>;
export type RotatedSecret = Answer<'/api/v1/endpoints/{id}/rotate-secret', 'post', 200>;
export type EventTypes = Answer<'/api/v1/event-types', 'get', 200>;
/** `GET /api/v1/endpoints/{id}/stats`: an endpoint's health, with `series` when asked for. */
export type EndpointStats = Answer<'/api/v1/endpoints/{id}/stats', 'get', 200>;
/** `GET /api/v1/stats`: the health of every endpoint the caller may see, with `series` when asked for. */
export type OverviewStats = Answer<'/api/v1/stats', 'get', 200>;
/** `POST /api/v1/portal-links`: `{user_id, scope?, ttl_s?, session_ttl_s?}`. */
export type CreatePortalLinkInput = Body<'/api/v1/portal-links', 'post'>;
/** A new portal link: `{id, url, expires_at}`; `url` carries the token, shown only here. */
export type PortalLink = Answer<'/api/v1/portal-links', 'post', 201>;
export type PortalLinkPage = Answer<'/api/v1/portal-links', 'get', 200>;
export type ListPortalLinksQuery = paths['/api/v1/portal-links']['get']['parameters']['query'];
/** `1h`: the last hour by minute (60 intervals); `24h`: the last 24 hours by hour (24 intervals). */
export type SeriesRange = NonNullable<NonNullable<paths['/api/v1/stats']['get']['parameters']['query']>['series']>;

/** Options of {@link createWebhooksClient}. */
export interface WebhooksClientOptions {
  /** The api's base URL, e.g. `https://api.example.com` (either layout serves these routes). */
  baseUrl: string;
  /** A service key (`sk_...`), a portal session (`ps_...`), or a user's token together with `userId`. */
  token: string;
  /** With a user token: the user's id (sent as `X-Api-Client-Id`). */
  userId?: number;
  /** Retries of a failed request; see {@link RetryOptions}. */
  retry?: RetryOptions;
  /** The fetch to use; default the global one. */
  fetch?: typeof fetch;
}

/** Options of a send: its Idempotency-Key (generated when absent). */
export interface SendOptions {
  /** 1..255 printable ASCII characters; the same key makes the api answer the first result again. */
  idempotencyKey?: string;
}

/**
 * An answer of the api other than 2xx, after retries: its HTTP status and its message.
 * `body` is the JSON the api sent (`{"message": ...}`, Layout A adds `status`).
 */
export class WebhooksApiError extends Error {
  readonly status: number;
  readonly body: unknown;

  constructor(status: number, body: unknown) {
    const message = typeof body === 'object' && body !== null && typeof (body as { message?: unknown }).message === 'string' ? (body as { message: string }).message : `HTTP ${status}`;
    super(message);
    this.name = 'WebhooksApiError';
    this.status = status;
    this.body = body;
  }
}

/** The client {@link createWebhooksClient} makes. Every method throws {@link WebhooksApiError} for a non-2xx answer. */
export interface WebhooksClient {
  /** Sends one signed webhook to a URL (service key with `webhooks:send`); resolves with its delivery id (`msg_...`). */
  sendWebhook(input: SendWebhookInput, options?: SendOptions): Promise<Answer<'/api/v1/webhooks', 'post', 202>>;
  /** Fans an event of the catalog out to the subscribed endpoints; resolves with the delivery ids. */
  publishEvent(input: PublishEventInput, options?: SendOptions): Promise<Answer<'/api/v1/events', 'post', 202>>;
  /** One page of deliveries, newest first. */
  listDeliveries(query?: ListDeliveriesQuery): Promise<DeliveryPage>;
  /** A delivery with its attempts. */
  getDelivery(id: string): Promise<Delivery>;
  /** Attempts a finished delivery once more, with the same webhook-id. */
  redeliver(id: string): Promise<void>;
  listEndpoints(query?: NonNullable<paths['/api/v1/endpoints']['get']['parameters']['query']>): Promise<EndpointPage>;
  /** Resolves with the endpoint's id and its signing secret, shown this once. */
  createEndpoint(input: CreateEndpointInput): Promise<CreatedEndpoint>;
  getEndpoint(id: number): Promise<Endpoint>;
  updateEndpoint(id: number, input: UpdateEndpointInput): Promise<Endpoint>;
  deleteEndpoint(id: number): Promise<void>;
  /** A new secret; the old one keeps signing for `overlapHours` (default 24). */
  rotateEndpointSecret(id: number, overlapHours?: number): Promise<RotatedSecret>;
  /**
   * Queues, oldest first, the post changes and published events made since `since` that the
   * endpoint would receive now and never got (at most 10,000 a call); resolves with how many.
   */
  replayEndpoint(id: number, since: Date): Promise<{ count: number }>;
  /**
   * An endpoint's health over the last 24 h (attempts, success rate, p50/p95 ms, circuit);
   * with `series`, also its attempts per minute (`1h`) or hour (`24h`), oldest first, by
   * outcome (succeeded, failed, retried) with their p50/p95 latency.
   */
  getEndpointStats(id: number, series?: SeriesRange): Promise<EndpointStats>;
  /** The same over every endpoint the caller may see (an operator's key: all; a user: their own). */
  getStats(series?: SeriesRange): Promise<OverviewStats>;
  listEventTypes(): Promise<EventTypes>;
  /**
   * Mints a one-time link into the dashboard for one user (service key with `portal:write`):
   * hand `url` to that user; it opens once, before `expires_at`.
   */
  createPortalLink(input: CreatePortalLinkInput): Promise<PortalLink>;
  /** One page of a user's portal links, newest first, with their state (never their tokens). */
  listPortalLinks(query: ListPortalLinksQuery): Promise<PortalLinkPage>;
  /** Revokes a portal link: it no longer opens, and the session it opened ends within 1 s. */
  revokePortalLink(id: number): Promise<void>;
  /** The typed openapi-fetch client underneath, for any other route of the api. */
  readonly api: Client<paths>;
}

/**
 * A typed client of the api's webhook routes, generated from its OpenAPI document
 * (openapi-typescript types, openapi-fetch calls). Every send carries an Idempotency-Key,
 * generated unless given, and a retried send reuses it, so a retry never sends a webhook twice
 * (as Stripe's clients do); retries follow {@link RetryOptions}.
 */
export function createWebhooksClient(options: WebhooksClientOptions): WebhooksClient {
  const headers: Record<string, string> = { authorization: `Bearer ${options.token}` };
  if (options.userId !== undefined) headers['x-api-client-id'] = String(options.userId);
  const api = createFetchClient<paths>({
    baseUrl: options.baseUrl.replace(/\/$/, ''),
    headers,
    fetch: fetchWithRetries(options.fetch ?? globalThis.fetch, options.retry),
  });
  const keyed = (send: SendOptions | undefined) => ({ 'idempotency-key': send?.idempotencyKey ?? crypto.randomUUID() });

  /** The answer's data, or a WebhooksApiError with its status and message. */
  async function unwrap<T>(call: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
    const { data, error, response } = await call;
    if (!response.ok) throw new WebhooksApiError(response.status, error);
    return data as T;
  }

  return {
    api,
    sendWebhook: (input, send) => unwrap(api.POST('/api/v1/webhooks', { body: input, headers: keyed(send) })),
    publishEvent: (input, send) => unwrap(api.POST('/api/v1/events', { body: input, headers: keyed(send) })),
    listDeliveries: (query) => unwrap(api.GET('/api/v1/webhooks', { params: { query } })),
    getDelivery: (id) => unwrap(api.GET('/api/v1/webhooks/{id}', { params: { path: { id } } })),
    redeliver: async (id) => {
      await unwrap(api.POST('/api/v1/webhooks/{id}/redeliver', { params: { path: { id } } }));
    },
    listEndpoints: (query) => unwrap(api.GET('/api/v1/endpoints', { params: { query } })),
    createEndpoint: (input) => unwrap(api.POST('/api/v1/endpoints', { body: input })),
    getEndpoint: (id) => unwrap(api.GET('/api/v1/endpoints/{id}', { params: { path: { id } } })),
    updateEndpoint: (id, input) => unwrap(api.PATCH('/api/v1/endpoints/{id}', { params: { path: { id } }, body: input })),
    deleteEndpoint: async (id) => {
      await unwrap(api.DELETE('/api/v1/endpoints/{id}', { params: { path: { id } } }));
    },
    rotateEndpointSecret: (id, overlapHours = 24) =>
      unwrap(api.POST('/api/v1/endpoints/{id}/rotate-secret', { params: { path: { id } }, body: { overlap_hours: overlapHours } })),
    replayEndpoint: (id, since) =>
      unwrap(api.POST('/api/v1/endpoints/{id}/replay', { params: { path: { id } }, body: { since: since.toISOString() } })),
    getEndpointStats: (id, series) => unwrap(api.GET('/api/v1/endpoints/{id}/stats', { params: { path: { id }, query: { series } } })),
    getStats: (series) => unwrap(api.GET('/api/v1/stats', { params: { query: { series } } })),
    listEventTypes: () => unwrap(api.GET('/api/v1/event-types')),
    createPortalLink: (input) => unwrap(api.POST('/api/v1/portal-links', { body: input })),
    listPortalLinks: (query) => unwrap(api.GET('/api/v1/portal-links', { params: { query } })),
    revokePortalLink: async (id) => {
      await unwrap(api.DELETE('/api/v1/portal-links/{id}', { params: { path: { id } } }));
    },
  };
}
