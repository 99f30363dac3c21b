// An HTTP peer on 127.0.0.1 that answers every request 200 and stamps when each one arrived,
// run as its own process so that the stamps are not held back by whatever the test process
// is doing (adding thousands of jobs, parsing the lines): a test measuring the spacing of
// requests needs a clock that only this server's event loop shares. It prints one JSON line
// per event on stdout: `{"port"}` once listening, then `{"receivedAt","webhookId"}` for every
// request once its body has been read.
import { createServer } from 'node:http';

const report = (event) => process.stdout.write(`${JSON.stringify(event)}\n`);
const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    report({ receivedAt: Date.now(), webhookId: req.headers['webhook-id'] ?? null });
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end('{"ok":true}');
  });
});
server.listen(0, '127.0.0.1', () => report({ port: server.address().port }));
process.on('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
