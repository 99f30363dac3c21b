// A forward proxy on 127.0.0.1 built with the `proxy` package, run as its own process because
// that package is an ES module, which the test runner's module loader does not load. It
// prints one JSON line per event on stdout: `{"port"}` once listening, then
// `{"method","target","proxyAuthorization"}` for every request it receives, before it
// authenticates or forwards it. With PROXY_CREDENTIALS=user:password it answers 407 to a
// request without that Basic Proxy-Authorization. PROXY_POLICY, a JSON object from CONNECT
// targets (`host:port`) to a status, is its egress policy, as a filtering proxy such as
// smokescreen has: a CONNECT to a listed target gets that status and a body of the proxy's own.
import { STATUS_CODES, createServer } from 'node:http';
import { createProxy } from 'proxy';

const report = (event) => process.stdout.write(`${JSON.stringify(event)}\n`);
const server = createServer();
const seen = (req) => report({ method: req.method, target: req.url, proxyAuthorization: req.headers['proxy-authorization'] ?? null });
// Listeners added before the proxy's own run first: every request is reported, refused or not.
server.on('request', seen);
server.on('connect', seen);
createProxy(server);
const policy = JSON.parse(process.env.PROXY_POLICY ?? '{}');
// The package's own CONNECT handler (added last), run for the targets the policy lets through.
const tunnel = server.listeners('connect').at(-1);
server.removeListener('connect', tunnel);
server.on('connect', (req, socket, head) => {
  const status = policy[req.url];
  if (status === undefined) return tunnel.call(server, req, socket, head);
  const body = `egress policy: ${status} ${STATUS_CODES[status]} for ${req.url}\n`;
  socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
});
const credentials = process.env.PROXY_CREDENTIALS;
if (credentials) {
  const expected = `Basic ${Buffer.from(credentials).toString('base64')}`;
  server.authenticate = (req) => req.headers['proxy-authorization'] === expected;
}
server.listen(0, '127.0.0.1', () => report({ port: server.address().port }));
process.on('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
