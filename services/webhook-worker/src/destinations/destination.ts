import type { Config } from '../../../../shared/config';
import type { Logger } from 'pino';
import type { EndpointAuth } from '../../../../shared/db';

/** A delivery signed and ready to leave: what every destination provider sends. */
export interface SignedMessage {
  /** The stable webhook-id. */
  webhookId: string;
  /** Where it goes: the endpoint's URL as claimed (attempts follow their endpoint, docs/design.md §6.3). */
  url: string;
  method: string;
  /** The delivery's own and the endpoint's headers, with the signature set. */
  headers: Record<string, string>;
  /** The exact bytes that were signed. */
  body: Buffer;
  /** The endpoint it is for, with its credentials; `id` null for an ad-hoc send. */
  endpoint: {
    id: number | null;
    /** OAuth2 client credentials; null: none. */
    auth: EndpointAuth | null;
    /** PEM certificate and key presented for mutual TLS; null: none. */
    clientCertificate: { cert: string; key: string } | null;
  };
}

/**
 * What a destination made of one attempt, in terms the record and the retry policy share with
 * every provider (docs/design.md §6.3). `status` is the destination's
 * status code where it has one (HTTP), else null; `excerpt` the first bytes of its answer as
 * text; `durationMs` the whole attempt's.
 */
export type DeliveryOutcome =
  | { kind: 'succeeded'; status: number | null; excerpt: string | null; durationMs: number }
  | {
      kind: 'failed';
      /** Why no usable answer came (users read it as `last_error`); null when the answer itself is the failure. */
      error: string | null;
      status: number | null;
      excerpt: string | null;
      durationMs: number;
      /** False: trying again cannot help (a refused target); the delivery fails now. */
      retryable: boolean;
      /** The destination asked for this wait, ms from now; null: none. */
      retryAfterMs: number | null;
      /** The destination is overloaded (a timeout, HTTP 429): the retry waits longer. */
      overloaded: boolean;
      /** It counts as a failure for the endpoint's circuit; else it says nothing of its health. */
      unhealthy: boolean;
    }
  | {
      /** Nothing left, through no fault of the endpoint (the operator's egress proxy refused): no attempt is used. */
      kind: 'unsent';
      /** How long to wait before trying again, ms. */
      waitMs: number;
    };

/** What a provider may ask of the attempt while it sends. */
export interface SendContext {
  /**
   * Resolves once one more request of this attempt may leave within the endpoint's rate limit
   * (docs/design.md §14.1), counted as a start of its own; for a provider that sends twice in one attempt.
   */
  admitAnother(): Promise<void>;
  log: Logger;
}

/** One type of destination (docs/design.md §6.3, "Destinations"): sends a signed message, never throws. */
export interface Destination {
  send(message: SignedMessage, context: SendContext): Promise<DeliveryOutcome>;
  /** Drops its pooled connections. */
  close(): void;
}

/** What every provider is made with. */
export interface DestinationOptions {
  config: Config;
  logger: Logger;
  /** Uniform in [0, 1); tests pin it. */
  random: () => number;
}
