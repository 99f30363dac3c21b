import type { Destination, DestinationOptions } from './destination';
import { createHttpDestination } from './http';

export type { DeliveryOutcome, Destination, DestinationOptions, SendContext, SignedMessage } from './destination';

/**
 * The providers, by endpoint type (docs/design.md §6.3, "Destinations"). A type is a folder
 * beside http/ and one entry here; the steps of an attempt, its record and its retries do
 * not depend on the type.
 */
const PROVIDERS: Record<string, (options: DestinationOptions) => Destination> = {
  http: createHttpDestination,
};

/** The destinations of one worker process, one per type, made once and shared by every attempt. */
export interface Destinations {
  /**
   * The destination of an endpoint of `type`.
   * @throws Error for a type no provider handles (the api accepts only known types)
   */
  of(type: string): Destination;
  /** Drops every destination's pooled connections. */
  close(): void;
}

/** Makes every provider's destination (each keeps its connections for the life of the process). */
export function createDestinations(options: DestinationOptions): Destinations {
  const made = new Map(Object.entries(PROVIDERS).map(([type, create]) => [type, create(options)]));
  return {
    of(type) {
      const destination = made.get(type);
      if (!destination) throw new Error(`no destination provider for endpoint type ${type}`);
      return destination;
    },
    close() {
      for (const destination of made.values()) destination.close();
    },
  };
}
