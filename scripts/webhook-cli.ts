import { parseArgs } from 'node:util';
import { loadConfig } from '../shared/config';
import { type SendField, WebhookRequest } from '../shared/webhook';

const USAGE = `Usage: npm run webhook -- send --url URL --event EVENT --data JSON [options]
  --secret S        shared secret (default: derived from APP_KEY and WEBHOOK_SALT)
  --method M        HTTP method (default POST)
  --field F         body | query | form_params | multipart (default: query for GET, else body)
  --timeout SEC     seconds to wait for the answer, 0 = none (default WEBHOOK_TIMEOUT_MS)
  --algo A          sha256 | sha384 | sha512 for the X-Signature header (default sha256)`;

/** Where the CLI writes; the process streams by default, a buffer in tests. */
export interface CliOutput {
  out(text: string): void;
  err(text: string): void;
}

/**
 * `send`: signs one webhook (DESIGN §7) and sends it now. Prints one JSON line
 * `{"id","status","signature","response"}` on success.
 *
 * @param argv - the arguments after the script name
 * @returns the exit code: 0 sent and answered 2xx, 1 sending failed, 2 bad usage or input
 */
export async function runWebhookCli(argv: string[], output: CliOutput, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  let values: Record<string, string | undefined>;
  let command: string | undefined;
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
      },
    });
    values = parsed.values;
    command = parsed.positionals[0];
  } catch (error) {
    output.err(`${(error as Error).message}\n${USAGE}\n`);
    return 2;
  }
  if (command !== 'send' || !values.url || !values.event || values.data === undefined) {
    output.err(`${USAGE}\n`);
    return 2;
  }

  let hook: WebhookRequest;
  try {
    const timeout = values.timeout === undefined ? loadConfig(env, 'cli').webhookTimeoutMs / 1000 : Number(values.timeout);
    hook = new WebhookRequest(values.url, values.method ?? 'POST', timeout)
      .setPayload(values.data)
      .setEvent(values.event)
      .setAlgo(values.algo ?? 'sha256')
      .sign(values.secret ?? null);
  } catch (error) {
    output.err(`${(error as Error).message}\n`);
    return 2;
  }
  try {
    const response = await hook.send((values.field as SendField | undefined) ?? null);
    output.out(`${JSON.stringify({ id: hook.getWebhookId(), status: response.status, signature: hook.getSignature(), response: response.data })}\n`);
    return 0;
  } catch (error) {
    const { name, message } = error as Error;
    const status = (error as { status?: number | null }).status ?? null;
    output.err(`${JSON.stringify({ error: name, message, status, id: hook.getWebhookId() })}\n`);
    return name === 'RequestError' ? 1 : 2;
  }
}

if (require.main === module) {
  runWebhookCli(process.argv.slice(2), {
    out: (text) => process.stdout.write(text),
    err: (text) => process.stderr.write(text),
  }).then((code) => {
    process.exitCode = code;
  });
}
