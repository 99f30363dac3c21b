import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { serializeEnvelope } from '../shared/webhook/envelope';
import { signedHeaders, signHex, signStandard, verifyHex, verifyStandard } from '../shared/webhook/signing';
import { formatSection, Figure, Section } from './lib/report';
import { BenchSettings, loadBenchSettings } from './lib/settings';
import { measureOps } from './lib/timing';

/** The envelope sizes every signing figure is measured at. */
export const SIZES: ReadonlyArray<[label: string, bytes: number]> = [
  ['200 B', 200],
  ['2 KB', 2 * 1024],
  ['64 KB', 64 * 1024],
];

/**
 * Sign and verify operations per second of our signing module, beside the `standardwebhooks`
 * package (the goal: at least 3x) and bare node:crypto HMAC (the limit), for envelopes of
 * 200 B, 2 KB and 64 KB. Every contender signs the same body string with the same secret.
 */
export function runSigningBench(settings: BenchSettings): Section {
  const options = { rounds: settings.signRounds, roundMs: settings.signRoundMs };
  const secret = `whsec_${randomBytes(32).toString('base64')}`;
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const id = 'msg_2b4Cxb0Yqfd8yV3bJ6yE1Q';
  // A timestamp of now, so every verifier's ±5 minute window accepts it for the whole run.
  const timestamp = Math.floor(Date.now() / 1000);
  const date = new Date(timestamp * 1000);
  const wh = new Webhook(secret);
  const figures: Figure[] = [];
  const PACKAGE = 'standardwebhooks';
  const LIMIT = 'node:crypto';

  /** One figure: ours, then (when given) the package, then the bare node:crypto limit, measured side by side. */
  const compare = (name: string, ours: () => unknown, limit: () => unknown, pkg?: () => unknown, limitName = LIMIT): void => {
    const [oursOps, limitOps, pkgOps] = measureOps(pkg ? [ours, limit, pkg] : [ours, limit], options);
    figures.push({
      name,
      unit: 'ops/s',
      ours: oursOps,
      ...(pkg ? { baseline: { name: PACKAGE, value: pkgOps }, goal: 3 } : {}),
      limit: { name: limitName, value: limitOps },
    });
  };

  for (const [label, bytes] of SIZES) {
    const body = envelopeOfSize(bytes);
    const v1 = signStandard(id, timestamp, body, secret);
    const headers = { 'webhook-id': id, 'webhook-timestamp': String(timestamp), 'webhook-signature': v1 };
    const hex = signHex(body, secret);
    if (wh.sign(id, date, body) !== v1 || bareStandard(key, id, timestamp, body) !== v1) {
      throw new Error(`signing contenders disagree on the ${label} body`);
    }
    compare(
      `sign webhook-signature, ${label}`,
      () => signStandard(id, timestamp, body, secret),
      () => bareStandard(key, id, timestamp, body),
      () => wh.sign(id, date, body),
    );
    compare(
      `verify webhook-signature, ${label}`,
      () => verifyStandard(body, headers, secret),
      () => timingSafeEqual(Buffer.from(bareStandard(key, id, timestamp, body)), Buffer.from(v1)),
      // jsonParse off: the package would otherwise also parse the body, which ours leaves to the caller.
      () => wh.verify(body, headers, { jsonParse: false }),
    );
    compare(
      `sign X-Signature, ${label}`,
      () => signHex(body, secret),
      () => createHmac('sha256', secret).update(body).digest('hex'),
    );
    compare(
      `verify X-Signature, ${label}`,
      () => verifyHex(body, secret, hex),
      () => timingSafeEqual(createHmac('sha256', secret).update(body).digest(), Buffer.from(hex, 'hex')),
    );
    compare(
      `all delivery headers (one attempt), ${label}`,
      () => signedHeaders({ id, timestamp, body, secret }),
      () => [createHmac('sha256', secret).update(body).digest('hex'), bareStandard(key, id, timestamp, body)],
      undefined,
      `${LIMIT}, both HMACs`,
    );
  }

  return {
    title: 'Signing (single thread, median of rounds)',
    figures,
    notes: [
      `Each figure is the median of ${settings.signRounds} rounds of about ${settings.signRoundMs} ms per contender, after two warm-up rounds; the contenders of a figure take turns within every round, so load from other processes hits them alike. Secret \`whsec_\` + 32 random bytes; the body is a post.created envelope padded to the size.`,
      'The standardwebhooks package has no X-Signature (hex) scheme, so those rows compare with node:crypto only.',
      'The package verifies with `jsonParse: false`, so it does the same work as ours (no body parsing).',
    ],
  };
}

/** A Luminova envelope (docs/design.md §7) of exactly `bytes` bytes, as the worker would send it. */
export function envelopeOfSize(bytes: number): string {
  const build = (text: string) =>
    serializeEnvelope(
      { pid: '48213', uuid: '0b6f3f4e-6c5a-4d0e-9a38-6f0f3c1d2e4b', user_id: 1, title: 'Benchmark post', content: text },
      { event: 'post.created', signable: true },
    );
  const base = Buffer.byteLength(build(''));
  if (base > bytes) throw new Error(`an envelope cannot be as small as ${bytes} bytes`);
  return build('x'.repeat(bytes - base));
}

function bareStandard(key: Buffer, id: string, timestamp: number, body: string): string {
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

if (require.main === module) {
  process.stdout.write(formatSection(runSigningBench(loadBenchSettings())));
}
