import type { EndpointAuth, WebhookEndpoint } from '../../db';
import { maskedUrl } from '../../http/url-display';
import { type EndpointAuthView, presentAuth } from './auth';
import { type ClientCertificateView, presentClientCertificate } from './client-certificate';
import { presentHeaders } from './headers';

/** An endpoint as the operations API shows it (docs/design.md §11.1); never its secrets. */
export interface EndpointView {
  id: number;
  url: string;
  /** Empty: every event. */
  events: string[];
  description: string | null;
  active: boolean;
  disabled_reason: string | null;
  /** The owning user, or null for an operator endpoint. */
  user_id: number | null;
  /** Sent with every delivery; sensitive values read as `********` (headers.ts `MASKED`). */
  headers: Record<string, string>;
  /** `fifo`: deliveries arrive one at a time in the order their events were made. */
  ordering: EndpointOrdering;
  /** Attempts started per second at most, across all workers; null: no limit. */
  rate_limit_per_s: number | null;
  /** Matched against each event's data before a delivery is made; null: every event. */
  filter: Record<string, unknown> | null;
  /** `hmac-sha256` (X-Signature and `v1`) or `ed25519` (Standard Webhooks `v1a`), set on create. */
  signature_scheme: SignatureScheme;
  /** An ed25519 endpoint's `whpk_` public key, which its receiver verifies with; null for HMAC. */
  public_key: string | null;
  /** OAuth2 client credentials the worker gets a bearer token with; the secret reads as `********`; null: none. */
  auth: EndpointAuthView | null;
  /** The certificate presented for mutual TLS: its subject and expiry, never the key; null: none. */
  client_certificate: ClientCertificateView | null;
  created_at: string;
  updated_at: string;
}

export type EndpointOrdering = 'unordered' | 'fifo';
export type SignatureScheme = 'hmac-sha256' | 'ed25519';

/** The API's view of a model row. */
export function presentEndpoint(row: WebhookEndpoint): EndpointView {
  return {
    id: row.id,
    url: maskedUrl(row.url),
    events: row.events,
    description: row.description,
    active: row.active,
    disabled_reason: row.disabledReason,
    user_id: row.userId,
    headers: presentHeaders(row.headers),
    ordering: row.ordering,
    rate_limit_per_s: row.rateLimitPerS,
    filter: row.filter,
    signature_scheme: row.signatureScheme,
    public_key: row.publicKey,
    auth: presentAuth(row.auth),
    client_certificate: presentClientCertificate(row.clientCert),
    created_at: row.createdAt.toISOString(),
    updated_at: row.updatedAt.toISOString(),
  };
}

/** A webhook_endpoints row as the list query reads it: the view's fields, with timestamps as Dates. */
export type EndpointRow = Omit<EndpointView, 'created_at' | 'updated_at' | 'auth' | 'client_certificate'> & {
  auth: EndpointAuth | null;
  client_cert: string | null;
  created_at: Date;
  updated_at: Date;
  created_at_micros: string;
};

/** The API's view of a row as the list query reads it. */
export function presentEndpointRow(row: EndpointRow): EndpointView {
  return {
    id: row.id,
    url: maskedUrl(row.url),
    events: row.events,
    description: row.description,
    active: row.active,
    disabled_reason: row.disabled_reason,
    user_id: row.user_id,
    headers: presentHeaders(row.headers),
    ordering: row.ordering,
    rate_limit_per_s: row.rate_limit_per_s,
    filter: row.filter,
    signature_scheme: row.signature_scheme,
    public_key: row.public_key,
    auth: presentAuth(row.auth),
    client_certificate: presentClientCertificate(row.client_cert),
    created_at: new Date(row.created_at).toISOString(),
    updated_at: new Date(row.updated_at).toISOString(),
  };
}
