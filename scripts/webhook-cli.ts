import { parseArgs } from 'node:util';
import { type Config, loadConfig } from '../shared/config';
import { type SendField, WebhookRequest } from '../shared/webhook';
import { type EgressProxy, createEgressProxy } from '../services/webhook-worker/src/destinations/http/egress-proxy';

const USAGE = `usage: npm run webhook -- send --url URL --event EVENT --data JSON [options]
  --secret S        shared secret (default: derived from APP_KEY and WEBHOOK_SALT)
  --method M        HTTP method (default POST; with --queue: POST, PUT, PATCH or DELETE)
  --field F         body | query | form_params | multipart (default: query for GET, else body)
  --timeout SEC     seconds to wait for the answer, 0 = none (default WEBHOOK_TIMEOUT_MS)
  --algo A          sha256 | sha384 | sha512 for the X-Signature header (default sha256)
  --queue           hand it to the webhook-worker (DATABASE_URL, REDIS_URL, REDIS_PREFIX, WEBHOOK_QUEUE_PARTITIONS) instead
                    of sending now; prints {"id":..,"queued":true}; not with --field or --timeout`;

/** Errors of the caller's input when enqueueing; anything else (database, network) exits 1. */
const QUEUE_INPUT_ERRORS = new Set(['InvalidWebhookError', 'EncryptionError', 'LogicError', 'ConfigError']);

/** Where the CLI writes; the process streams by default, a buffer in tests. */
export interface CliOutput {
  out(text: string): void;
  err(text: string): void;
}

/**
 * `send`: signs one webhook (docs/design.md §7) and sends it now. Prints one JSON line
 * `{"id","status","signature","response"}` on success. With `--queue` it enqueues the
 * webhook for the worker instead (`WebhookRequest.enqueue()`, docs/design.md §6.2) and prints
 * `{"id","queued":true}`; the id is the webhook-id the receiver will see. Sent now, it leaves
 * through WEBHOOK_PROXY_URL unless WEBHOOK_NO_PROXY lists the target, with the worker's own
 * proxy agents (docs/design.md §14.2), so the receiver sees the same egress address either way.
 *
 * @param argv - the arguments after the script name
 * @param env - the environment: the derived secret's APP_KEY and WEBHOOK_SALT, the egress
 *   proxy's WEBHOOK_PROXY_URL and WEBHOOK_NO_PROXY, and with `--queue` DATABASE_URL,
 *   REDIS_URL, REDIS_PREFIX and WEBHOOK_QUEUE_PARTITIONS
 * @returns the exit code: 0 sent and answered 2xx (or enqueued), 1 sending or enqueueing
 *   failed (e.g. PostgreSQL unreachable), 2 bad usage or input
 */
export async function runWebhookCli(argv: string[], output: CliOutput, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  let values: Record<string, string | undefined>;
  let queued: boolean;
  let command: string | undefined;
  let help: boolean;
  try {
    const parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        url: { type: 'string' },
        event: { type: 'string' },
        data: { type: 'string' },
        secret: { type: 'string' },
        method: { type: 'string' },
        field: { type: 'string' },
        timeout: { type: 'string' },
        algo: { type: 'string' },
        queue: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    });
    const { queue, help: wantsHelp, ...strings } = parsed.values;
    values = strings;
    queued = queue === true;
    help = wantsHelp === true;
    command = parsed.positionals[0];
  } catch (error) {
    output.err(`error: ${(error as Error).message}\n${USAGE}\n`);
    return 2;
  }
  if (help || command === 'help') {
    output.out(`${USAGE}\n`);
    return 0;
  }
  if (command !== 'send') {
    output.err(`error: ${command ? `unknown command "${command}"` : 'missing command'}\n${USAGE}\n`);
    return 2;
  }
  const { url, event, data } = values;
  if (!url || !event || data === undefined) {
    const missing = [!url && '--url', !event && '--event', data === undefined && '--data'].filter(Boolean);
    output.err(`error: ${missing.join(', ')} required\n${USAGE}\n`);
    return 2;
  }
  if (queued && (values.field !== undefined || values.timeout !== undefined)) {
    output.err(`error: --field and --timeout apply to sending now; the worker sends the JSON body with its own timeout\n${USAGE}\n`);
    return 2;
  }

  let config: Config;
  let hook: WebhookRequest;
  let proxy: EgressProxy | undefined;
  try {
    config = loadConfig(env, 'cli');
    const timeout = values.timeout === undefined ? config.webhookTimeoutMs / 1000 : Number(values.timeout);
    if (!queued && config.webhookProxyUrl !== undefined) {
      proxy = createEgressProxy({ url: config.webhookProxyUrl, noProxy: config.webhookNoProxy, maxSockets: 1 });
    }
    const agents = proxy?.applies(new URL(url)) ? { http: proxy.httpAgent, https: proxy.httpsAgent } : undefined;
    // The environment given here, not process.env, is where a derived secret comes from.
    hook = new WebhookRequest(url, values.method ?? 'POST', timeout, { appKey: config.appKey, salt: config.webhookSalt, agents })
      .setPayload(data)
      .setEvent(event)
      .setAlgo(values.algo ?? 'sha256')
      .sign(values.secret ?? null);
  } catch (error) {
    proxy?.close();
    output.err(`error: ${(error as Error).message}\n`);
    return 2;
  }
  if (queued) return enqueue(hook, output, config);
  try {
    const response = await hook.send((values.field as SendField | undefined) ?? null);
    output.out(`${JSON.stringify({ id: hook.getWebhookId(), status: response.status, signature: hook.getSignature(), response: response.data })}\n`);
    return 0;
  } catch (error) {
    const { name, message } = error as Error;
    const status = (error as { status?: number | null }).status ?? null;
    output.err(`${JSON.stringify({ error: name, message, status, id: hook.getWebhookId() })}\n`);
    return name === 'RequestError' ? 1 : 2;
  } finally {
    // Its pooled sockets to the proxy end now rather than at the proxy's idle timeout.
    proxy?.close();
  }
}

async function enqueue(hook: WebhookRequest, output: CliOutput, config: Config): Promise<number> {
  // Imported here so that sending now never loads Sequelize and BullMQ.
  const { createWebhookProducer } = await import('../shared/deliveries/webhook-producer');
  const producer = createWebhookProducer(config);
  try {
    const id = await hook.enqueue(producer);
    output.out(`${JSON.stringify({ id, queued: true })}\n`);
    return 0;
  } catch (error) {
    const { name, message } = error as Error;
    output.err(`${JSON.stringify({ error: name, message })}\n`);
    return QUEUE_INPUT_ERRORS.has(name) ? 2 : 1;
  } finally {
    await producer.close();
  }
}

if (require.main === module) {
  runWebhookCli(process.argv.slice(2), {
    out: (text) => process.stdout.write(text),
    err: (text) => process.stderr.write(text),
  }).then(
    (code) => {
      process.exitCode = code;
    },
    (err) => {
      process.stderr.write(`error: ${(err as Error).message}\n`);
      process.exitCode = 1;
    },
  );
}
