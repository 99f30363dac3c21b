import http from 'node:http';

/** One request of a paced run. */
export interface PacedRequest {
  method: string;
  /** Absolute http:// URL. */
  url: string;
  headers: Record<string, string>;
  body: string;
}

/** What a paced run achieved. */
export interface PacedResult {
  /** Requests answered with a 2xx. */
  ok: number;
  /** Requests answered otherwise, or that failed. */
  failed: number;
  /** From the first request sent to the last answer, seconds. */
  durationS: number;
}

/** Sending falls behind the schedule by more than this: the generator, not the server, would set the pace. */
const MAX_LAG_MS = 1_000;

/**
 * Open-loop load at a steady rate: request i leaves at start + i / rate, whether or not the
 * earlier ones were answered (wrk2's model), over keep-alive connections opened as needed.
 * autocannon's `overallRate` is a per-second budget per connection, spent as fast as the
 * server answers: each second's requests arrive in one burst at its start, so a latency
 * measured under it is the time to clear a burst, not the latency at that rate.
 *
 * @param rate - requests per second
 * @param amount - requests in all
 * @throws Error when the generator falls more than a second behind its own schedule
 */
export async function pacedLoad(request: PacedRequest, rate: number, amount: number): Promise<PacedResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
  const intervalMs = 1_000 / rate;
  const result: PacedResult = { ok: 0, failed: 0, durationS: 0 };
  const answers: Promise<void>[] = [];
  const started = performance.now();
  let lastAnswer = started;

  const send = () =>
    new Promise<void>((resolve) => {
      const outgoing = http.request(request.url, { method: request.method, headers: request.headers, agent }, (response) => {
        response.resume();
        response.once('end', () => {
          if (response.statusCode !== undefined && response.statusCode >= 200 && response.statusCode < 300) result.ok += 1;
          else result.failed += 1;
          lastAnswer = performance.now();
          resolve();
        });
      });
      outgoing.once('error', () => {
        result.failed += 1;
        lastAnswer = performance.now();
        resolve();
      });
      outgoing.end(request.body);
    });

  try {
    for (let sent = 0; sent < amount; ) {
      const due = Math.min(amount, Math.floor((performance.now() - started) / intervalMs) + 1);
      if (due - sent > (MAX_LAG_MS / intervalMs) && sent > 0) throw new Error(`paced load fell behind: ${due - sent} requests late`);
      for (; sent < due; sent++) answers.push(send());
      const next = started + sent * intervalMs;
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, next - performance.now())));
    }
    await Promise.all(answers);
  } finally {
    agent.destroy();
  }
  result.durationS = (lastAnswer - started) / 1_000;
  return result;
}
