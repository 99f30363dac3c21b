import type { EndpointOrdering } from './view';

/** The fields PATCH may change; `active: true` re-enables and clears `disabled_reason`. */
export interface EndpointChanges {
  url?: string;
  events?: string[];
  description?: string | null;
  active?: boolean;
  /** Replaces the whole map; `********` keeps a stored sensitive value, except across origins. */
  headers?: Record<string, unknown>;
  /** A switch to `fifo` orders the deliveries made from then on. */
  ordering?: EndpointOrdering;
  rateLimitPerS?: number | null;
  /** null removes it. */
  filter?: unknown;
  /** Replaces `auth` whole; null removes it; `client_secret: "********"` keeps the stored secret for the same token origin. */
  auth?: unknown;
  /** Replaces the certificate; null removes it; `key: "********"` keeps the stored key. */
  clientCertificate?: unknown;
}
