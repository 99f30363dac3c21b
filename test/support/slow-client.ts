import { connect } from 'node:net';

/** What a server did with a connection a test held open over node:net. */
export interface RawExchange {
  /** Everything the server sent, as latin1 text (status line first). */
  answer: string;
  /**
   * When the server closed the connection, ms after `since` (the connect, or for
   * {@link idleAfterAnswer} the last byte of the answer); null if it was still open at `giveUpMs`.
   */
  closedAfterMs: number | null;
}

interface Trickle {
  /** Written at once after connecting, e.g. a request line and some or all of the headers. */
  head: string;
  /** Written every `everyMs` after that, until the server closes or the test gives up. */
  drip: string;
  everyMs: number;
  /** How long to hold the connection at most, ms after connecting. */
  giveUpMs: number;
}

/**
 * Connects to 127.0.0.1:`port`, writes `head`, then `drip` every `everyMs`: a client that
 * sends a request as slowly as it likes (a slow-loris), never completing it in time.
 */
export function trickle(port: number, { head, drip, everyMs, giveUpMs }: Trickle): Promise<RawExchange> {
  return hold(port, head, giveUpMs, { drip, everyMs, clockFromAnswer: false });
}

/**
 * Sends one complete `request` on a keep-alive connection and, once the answer stopped
 * arriving, waits for the server to close the idle connection.
 */
export function idleAfterAnswer(port: number, request: string, giveUpMs: number): Promise<RawExchange> {
  return hold(port, request, giveUpMs, { clockFromAnswer: true });
}

interface HoldOptions {
  drip?: string;
  everyMs?: number;
  /** Measure the close from the answer's last byte rather than from the connect. */
  clockFromAnswer: boolean;
}

function hold(port: number, head: string, giveUpMs: number, options: HoldOptions): Promise<RawExchange> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let answer = '';
    let since = 0;
    let dripping: NodeJS.Timeout | undefined;
    const finish = (closedAfterMs: number | null) => {
      clearInterval(dripping);
      clearTimeout(giveUp);
      socket.destroy();
      resolve({ answer, closedAfterMs });
    };
    const giveUp = setTimeout(() => finish(null), giveUpMs);
    socket.on('connect', () => {
      since = Date.now();
      socket.write(head);
      const { drip, everyMs } = options;
      if (drip !== undefined) {
        dripping = setInterval(() => {
          if (socket.writable) socket.write(drip);
        }, everyMs);
      }
    });
    socket.on('data', (chunk: Buffer) => {
      answer += chunk.toString('latin1');
      if (options.clockFromAnswer) since = Date.now();
    });
    // A reset after the server gave up on us is still a close.
    socket.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code !== 'ECONNRESET' && error.code !== 'EPIPE') reject(error);
    });
    socket.on('close', () => finish(Date.now() - since));
  });
}

/**
 * Writes `parts` of one request `gapMs` apart on a fresh connection (`Connection: close` in
 * the request, so the server closes once it answered) and resolves with the answer.
 */
export async function sendInParts(port: number, parts: string[], gapMs: number): Promise<string> {
  const socket = connect(port, '127.0.0.1');
  let answer = '';
  socket.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
  const closed = new Promise<void>((resolve, reject) => {
    socket.on('close', () => resolve());
    socket.on('error', reject);
  });
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  for (const [index, part] of parts.entries()) {
    if (index > 0) await new Promise((resolve) => setTimeout(resolve, gapMs));
    socket.write(part);
  }
  await closed;
  return answer;
}

/**
 * Trickles a body a byte every 300 ms after `head` (which promises far more), and checks that
 * a server whose REQUEST_TIMEOUT_MS is 1,500 answered 408 and closed the connection within
 * that timeout and one check of Node's (every second).
 */
export async function expectTrickleEndedBy408(port: number, head: string): Promise<void> {
  const exchange = await trickle(port, { head, drip: 'a', everyMs: 300, giveUpMs: 6_000 });
  expect(exchange.answer).toMatch(/^HTTP\/1\.1 408 /);
  expect(exchange.closedAfterMs).not.toBeNull();
  expect(exchange.closedAfterMs).toBeGreaterThanOrEqual(1_400);
  expect(exchange.closedAfterMs).toBeLessThanOrEqual(3_000);
}
