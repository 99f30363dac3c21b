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
    client.on('data', (chunk: Buffer) => {
      if (dropMarker && chunk.includes(dropMarker)) {
        client.destroy();
        upstream.destroy();
      } else if (holding) held.push({ upstream, chunk });
      else upstream.write(chunk);
    });
    upstream.pipe(client);
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

function listen(server: net.Server, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
}
