import type { Logger } from 'pino';
import { parseGateKey } from '../../../shared/endpoint-gate';
import type { DeliveryStore } from './delivery-store';

/**
 * After a release reported that the circuit of `gateKey` opened (decided in Redis, docs/design.md §6.4):
 * `endpoint.failing` for an endpoint, written only the first time in its failure episode (the
 * episode's state in PostgreSQL decides, so a circuit Redis forgot and opened again, or another
 * worker, never repeats it), and its deliveries queued. An ad-hoc origin's circuit announces
 * nothing, and neither does one of an endpoint that moved to another origin since the attempt
 * that opened it started. Never throws: a notice missed here is missed, the circuit is unaffected.
 *
 * @param queueNotices - adds the jobs of recorded deliveries (the worker's; must not throw)
 * @param originEpoch - the endpoint's `origin_epoch` that attempt started with (null: unknown)
 */
export async function announceCircuitOpened(
  store: DeliveryStore,
  queueNotices: (deliveryIds: string[]) => Promise<void>,
  gateKey: string,
  originEpoch: number | null,
  log: Logger,
): Promise<void> {
  const named = parseGateKey(gateKey);
  if (!('endpointId' in named)) return;
  const { endpointId } = named;
  try {
    const noticeIds = await store.circuitOpened(endpointId, originEpoch);
    if (noticeIds.length > 0) await queueNotices(noticeIds);
  } catch (error) {
    log.warn({ err: error, endpointId }, 'could not announce endpoint.failing');
  }
}
