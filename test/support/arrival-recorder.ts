import { ArrivalLog } from './arrival-log';
import { startPeerProcess } from './peer-process';

/** One request as the recorder's own process stamped it. */
export interface Arrival {
  /** `Date.now()` in the recorder's process when the request's body was fully read. */
  receivedAt: number;
  /** The webhook-id header, or null. */
  webhookId: string | null;
}

/**
 * A real HTTP peer on 127.0.0.1 in a process of its own that answers every request 200 and
 * stamps its arrival there: for tests that measure how requests are spaced, which the test
 * process's own event loop, busy adding jobs or reading results, would blur by hundreds of ms.
 */
export interface ArrivalRecorder {
  /** `http://127.0.0.1:<port>`, without a trailing slash. */
  readonly url: string;
  readonly arrivals: ArrivalLog<Arrival>;
  close(): Promise<void>;
}

/** Starts an {@link ArrivalRecorder}; resolves once it listens. */
export async function startArrivalRecorder(): Promise<ArrivalRecorder> {
  const arrivals = new ArrivalLog<Arrival>('requests at the arrival recorder');
  const peer = await startPeerProcess<Arrival>('arrival-recorder-process.mjs', {}, (arrival) => arrivals.push(arrival));
  return { url: `http://127.0.0.1:${peer.port}`, arrivals, close: () => peer.close() };
}
