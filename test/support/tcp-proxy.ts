import net from 'node:net';

/** A TCP forwarder on 127.0.0.1 whose link to the target a test can cut and restore. */
export interface TcpProxy {
  port: number;
  /**
   * Cuts the link: open connections are destroyed; new ones are refused (`refuse`, as a
   * stopped server) or accepted and never answered (`hang`, as a vanished host).
   */
  cut(mode: 'refuse' | 'hang'): Promise<void>;
  /** Forwards again on the same port. */
  restore(): Promise<void>;
  /**
   * Holds what clients send (connections stay open, nothing reaches the target), as a
   * server too busy to read; `release()` delivers the held bytes in order.
   */
  hold(): void;
  release(): void;
  /**
   * Drops a connection, both ways, when its client sends bytes containing `marker` (which
   * never reach the target): a server that goes away in the middle of one exchange.
   */
  dropOn(marker: string): void;
  /**
   * PostgreSQL only: lets through the work whose bytes contain `marker` and loses the answer to
   * the statement that commits it: that statement itself when it ran on its own (its
   * ReadyForQuery says idle), else the COMMIT the client sends next. The server commits; the
   * client never hears so. Then `drop` closes the connection both ways (a connection lost
   * during COMMIT), `hang` keeps it open and silent (a server that never answers), until the
   * client closes it. Once per call.
   */
  loseCommitAnswer(marker: string, then: 'drop' | 'hang'): void;
  /**
   * Points the address at another port of the target's host, as a DNS name or a virtual IP
   * moved to a promoted standby: open connections are dropped (their clients see a reset) and
   * new ones reach the new target. A cut stays a cut.
   */
  retarget(port: number): void;
  close(): Promise<void>;
}

/**
 * Starts a forwarder from a free port on 127.0.0.1 to `initialTarget`, for tests that must make
 * a real server unreachable without stopping it (PostgreSQL here is shared by every test).
 */
export async function startTcpProxy(initialTarget: { host: string; port: number }): Promise<TcpProxy> {
  let target = initialTarget;
  const sockets = new Set<net.Socket>();
  let mode: 'forward' | 'hang' = 'forward';
  let holding = false;
  let dropMarker: Buffer | undefined;
  let commitLoss: { marker: Buffer; then: 'drop' | 'hang' } | undefined;
  const held: { upstream: net.Socket; chunk: Buffer }[] = [];
  const track = (socket: net.Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
  };
  const onConnection = (client: net.Socket) => {
    track(client);
    if (mode === 'hang') return;
    const upstream = net.connect(target.port, target.host);
    track(upstream);
    const answers = answerWatch();
    client.on('data', (chunk: Buffer) => {
      if (dropMarker && chunk.includes(dropMarker)) {
        client.destroy();
        upstream.destroy();
        return;
      }
      if (commitLoss && answers.phase === 'idle' && chunk.includes(commitLoss.marker)) {
        answers.arm(commitLoss.then);
        commitLoss = undefined;
      } else if (answers.phase === 'await-commit' && chunk.includes(COMMIT)) {
        answers.phase = 'commit-sent';
      }
      if (holding) held.push({ upstream, chunk });
      else upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      const verdict = answers.take(chunk);
      if (verdict.forward.length > 0) client.write(verdict.forward);
      if (verdict.lost === 'drop') {
        client.destroy();
        upstream.destroy();
      }
    });
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  };
  let server = net.createServer(onConnection);
  await listen(server, 0);
  const port = (server.address() as net.AddressInfo).port;
  const dropAll = () => {
    for (const socket of sockets) socket.destroy();
  };
  const stop = () => new Promise<void>((resolve) => (server.listening ? server.close(() => resolve()) : resolve()));
  return {
    port,
    async cut(cutMode) {
      dropAll();
      if (cutMode === 'refuse') {
        await stop();
      } else {
        mode = 'hang';
      }
    },
    async restore() {
      mode = 'forward';
      if (!server.listening) {
        server = net.createServer(onConnection);
        await listen(server, port);
      }
    },
    hold() {
      holding = true;
    },
    dropOn(marker) {
      dropMarker = Buffer.from(marker, 'utf8');
    },
    loseCommitAnswer(marker, then) {
      commitLoss = { marker: Buffer.from(marker, 'utf8'), then };
    },
    retarget(port) {
      target = { host: target.host, port };
      dropAll();
    },
    release() {
      holding = false;
      for (const { upstream, chunk } of held.splice(0)) if (!upstream.destroyed) upstream.write(chunk);
    },
    async close() {
      dropAll();
      await stop();
    },
  };
}

const COMMIT = Buffer.from('COMMIT', 'utf8');

/**
 * One connection's answers from PostgreSQL while a commit's answer is to be lost. Messages are
 * a type byte and a 4-byte length that counts itself (PostgreSQL protocol, "Message Formats");
 * ReadyForQuery is `Z`, length 5, then the transaction status: `I` idle, `T` in a transaction,
 * `E` in a failed one. Answers are read whole from the statement that carried the marker on:
 * node-postgres sends a statement only after the previous one's ReadyForQuery.
 */
function answerWatch() {
  let pending = Buffer.alloc(0);
  let then: 'drop' | 'hang' = 'drop';
  const watch = {
    phase: 'idle' as 'idle' | 'marker-sent' | 'await-commit' | 'commit-sent' | 'lost',
    arm(mode: 'drop' | 'hang') {
      then = mode;
      watch.phase = 'marker-sent';
    },
    /** What of `chunk` reaches the client, and whether the commit's answer was just lost. */
    take(chunk: Buffer): { forward: Buffer; lost?: 'drop' | 'hang' } {
      if (watch.phase === 'lost') return { forward: Buffer.alloc(0) };
      if (watch.phase !== 'marker-sent' && watch.phase !== 'commit-sent') return { forward: chunk };
      pending = Buffer.concat([pending, chunk]);
      const status = readyForQueryStatus(pending);
      if (status === null) return { forward: Buffer.alloc(0) };
      const answer = pending;
      pending = Buffer.alloc(0);
      if (watch.phase === 'marker-sent' && status !== 'I') {
        watch.phase = 'await-commit';
        return { forward: answer };
      }
      watch.phase = 'lost';
      return { forward: Buffer.alloc(0), lost: then };
    },
  };
  return watch;
}

/** The status of the first whole ReadyForQuery message in `bytes`, or null when none is complete yet. */
function readyForQueryStatus(bytes: Buffer): string | null {
  for (let at = 0; at + 5 <= bytes.length; ) {
    const length = bytes.readUInt32BE(at + 1);
    if (bytes[at] === 0x5a && at + 6 <= bytes.length) return String.fromCharCode(bytes[at + 5]);
    at += 1 + length;
  }
  return null;
}

function listen(server: net.Server, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
}
