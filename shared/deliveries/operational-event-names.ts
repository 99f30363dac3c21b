/**
 * The operational events the system emits (docs/design.md §6.6): about an endpoint
 * (`endpoint.failing`, `endpoint.disabled`, `endpoint.recovered`) or a delivery given up
 * (`delivery.exhausted`). Each is in the event catalog (§11.1). Their names are reserved: no
 * caller may send, publish or add an event type of one of these names.
 */
export const OPERATIONAL_EVENTS = ['endpoint.failing', 'endpoint.disabled', 'endpoint.recovered', 'delivery.exhausted'] as const;

export type OperationalEvent = (typeof OPERATIONAL_EVENTS)[number];

const RESERVED = new Set<string>(OPERATIONAL_EVENTS);

/**
 * Whether `name` is reserved for the operational events: one of {@link OPERATIONAL_EVENTS},
 * compared without surrounding spaces and case, so that no caller's `Endpoint.Failing ` passes
 * for the system's own notice with a receiver that folds case.
 */
export function isReservedEventName(name: string): boolean {
  return RESERVED.has(name.trim().toLowerCase());
}
