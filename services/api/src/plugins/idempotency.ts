import { createHash } from 'node:crypto';
import type {
  FastifyBaseLogger,
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
  onErrorAsyncHookHandler,
  onSendAsyncHookHandler,
  preHandlerAsyncHookHandler,
} from 'fastify';
import type { Sequelize, Transaction } from 'sequelize';
import { isOutcomeUnknown } from '../../../../shared/db';
import type { InCommit } from '../../../../shared/deliveries/enqueue';
import { ApiError } from '../errors';
import type { IdempotencyOwner } from '../../../../shared/posts/idempotency';
import { StoredAnswer, createIdempotencyStore } from './idempotency-store';
import { rateLimitKey } from './rate-limit';

export type { StoredAnswer } from './idempotency-store';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Honour an `Idempotency-Key` header on this route. */
    idempotency?: boolean;
  }
}

/** The 409 message for a key sent again with another request (docs/design.md §12.1). */
export const IDEMPOTENCY_KEY_REUSED = 'Idempotency-Key reused with a different request.';
/** The 409 message, with Retry-After, while the key's first request may still commit (docs/design.md §12.1). */
export const IDEMPOTENCY_KEY_IN_PROGRESS = 'A request with this Idempotency-Key is in progress.';

const HEADER = 'idempotency-key';
const KEY_FORMAT = /^[\x20-\x7e]{1,255}$/;

/** docs/design.md §15: a claim whose process died frees its key at most this long after the death. */
export const IDEMPOTENCY_LEASE_MS = 60_000;

export interface IdempotencyOptions {
  sequelize: Sequelize;
  log: FastifyBaseLogger;
  /** How long a duplicate waits for the first request to finish before a 409, ms. Default a sixth of the lease (10 s of 60 s). */
  waitMs?: number;
  /** How long a claim holds without renewal, ms; renewed every third of it while the request runs. Default {@link IDEMPOTENCY_LEASE_MS}. */
  leaseMs?: number;
}

type Owner = IdempotencyOwner;

/** The claim a request holds, for the route that runs it. */
export interface IdempotencyClaim extends IdempotencyOwner {
  /**
   * The pid of a post an earlier request with this key created before its process died
   * unanswered: the route answers with that post instead of creating another one.
   */
  committedPostPid: number | null;
  /**
   * Records `answer` under the key inside `transaction`, the one that commits what the request
   * made: a retry after the process died, or after a connection lost during COMMIT, replays it.
   *
   * @throws ApiError 409 {@link IDEMPOTENCY_KEY_IN_PROGRESS} when another request with the key
   *   answered first (a claim taken over after its lease lapsed); the transaction must roll back
   */
  recordAnswer(transaction: Transaction, answer: StoredAnswer): Promise<void>;
}

const claims = new WeakMap<FastifyRequest, IdempotencyClaim>();

/**
 * The Idempotency-Key claim `request` holds, or null (no key, or a route without idempotency).
 * A create passes it to the repository, which records the new post's pid under the key in the
 * statement that creates it.
 */
export function idempotencyClaimOf(request: FastifyRequest): IdempotencyClaim | null {
  return claims.get(request) ?? null;
}

/**
 * For a route whose writes run a callback in their transaction (`enqueueWebhook`,
 * `publishEvent`): records the JSON answer `status` with body `bodyOf(deliveryIds)` under the
 * request's Idempotency-Key in that transaction (docs/design.md §12.1). The route must
 * answer exactly that. Undefined when the request holds no key.
 */
export function answerInCommit(request: FastifyRequest, status: number, bodyOf: (deliveryIds: string[]) => object): InCommit | undefined {
  const claim = idempotencyClaimOf(request);
  if (!claim) return undefined;
  return (transaction, deliveryIds) =>
    claim.recordAnswer(transaction, { status, body: JSON.stringify(bodyOf(deliveryIds)), contentType: 'application/json; charset=utf-8' });
}

/**
 * Idempotent requests (docs/design.md §12.1; the scheme of Stripe's and the IETF draft
 * draft-ietf-httpapi-idempotency-key-header): on every route registered after this in `scope`
 * with `config: { idempotency: true }`, a request carrying `Idempotency-Key` (1..255 printable
 * ASCII characters, else 400) is run at most once per principal and key for 24 h:
 * - the first claims the key in PostgreSQL (`idempotency_keys`, one INSERT .. ON CONFLICT) before
 *   the handler runs, and its answer (status, body, content type) is stored before it is sent;
 * - the same key with the same method, URL and body gets that answer again, marked
 *   `Idempotent-Replayed: true`, without running the handler;
 * - while the first is still running, a duplicate waits for its answer (never runs beside it);
 * - the same key with another request: 409 {@link IDEMPOTENCY_KEY_REUSED} in the layout's shape.
 * What a request commits is recorded under its key in the same transaction (a post's pid, or
 * the answer itself: {@link IdempotencyClaim.recordAnswer}). A 5xx frees the key only when the
 * failure is known to have committed nothing; one whose outcome is unknown (the connection
 * lost with a statement or COMMIT unanswered, shared/db `isOutcomeUnknown`) keeps it, and a
 * key holding a committed pid or answer is never freed. A claim is a lease of `leaseMs` (60 s)
 * that its process renews while the request runs: until a kept or orphaned claim's lease
 * lapses, a duplicate gets 409 {@link IDEMPOTENCY_KEY_IN_PROGRESS} with Retry-After; after it,
 * the retry replays the recorded answer, answers with the post the first committed
 * ({@link IdempotencyClaim.committedPostPid}), or runs again when nothing was committed; it
 * never makes a second post or delivery (docs/design.md §12.1, §15). Runs after validation:
 * a request refused by its schema claims nothing.
 */
export function registerIdempotency(
  scope: FastifyInstance,
  { sequelize, log, leaseMs = IDEMPOTENCY_LEASE_MS, waitMs = leaseMs / 6 }: IdempotencyOptions,
): void {
  const owners = new WeakMap<FastifyRequest, Owner>();
  const failures = new WeakMap<FastifyRequest, Error>();
  const renewals = new WeakMap<FastifyRequest, NodeJS.Timeout>();
  const store = createIdempotencyStore(sequelize, log, leaseMs);
  const stopRenewing = (request: FastifyRequest) => {
    clearInterval(renewals.get(request));
    renewals.delete(request);
  };

  const preHandler: preHandlerAsyncHookHandler = async function idempotencyPreHandler(request: FastifyRequest, reply: FastifyReply) {
    const key = request.headers[HEADER];
    if (key === undefined || !request.principal) return;
    if (typeof key !== 'string' || !KEY_FORMAT.test(key)) throw new ApiError(400, 'Idempotency-Key must be 1 to 255 printable ASCII characters.');
    const owner = { principal: rateLimitKey(request), key };
    const fingerprint = fingerprintOf(request);
    const deadline = Date.now() + waitMs;
    for (;;) {
      const claim = await store.claim(owner, fingerprint);
      if (claim.kind === 'claimed') {
        owners.set(request, owner);
        const recordAnswer = async (transaction: Transaction, answer: StoredAnswer) => {
          if (!(await store.answerInCommit(owner, answer, transaction))) throw new ApiError(409, IDEMPOTENCY_KEY_IN_PROGRESS);
        };
        claims.set(request, { ...owner, committedPostPid: claim.committedPostPid, recordAnswer });
        const renewal = setInterval(() => {
          store.renew(owner).catch((err: Error) => request.log.warn({ err }, 'renewing an idempotency key lease failed'));
        }, Math.max(1, Math.floor(leaseMs / 3)));
        renewal.unref();
        renewals.set(request, renewal);
        return;
      }
      if (claim.kind === 'mismatch') throw new ApiError(409, IDEMPOTENCY_KEY_REUSED);
      if (claim.kind === 'answered') {
        const { status, body, contentType } = claim.response;
        if (contentType) reply.type(contentType);
        return reply.code(status).header('Idempotent-Replayed', 'true').send(body);
      }
      if (Date.now() > deadline) {
        // Retry-After tells a client this 409 is worth retrying, unlike a key reused with another
        // request: by then the first has answered, or its lease has lapsed.
        reply.header('Retry-After', String(claim.leaseLeftS));
        throw new ApiError(409, IDEMPOTENCY_KEY_IN_PROGRESS);
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };

  // The error behind a 5xx, seen before the error handler turns it into an answer.
  const onError: onErrorAsyncHookHandler = async function idempotencyOnError(request, _reply, error) {
    if (owners.has(request)) failures.set(request, error);
  };

  const onSend: onSendAsyncHookHandler = async function idempotencyOnSend(request, reply, payload) {
    const owner = owners.get(request);
    if (!owner) return payload;
    owners.delete(request);
    stopRenewing(request);
    const body = typeof payload === 'string' ? payload : Buffer.isBuffer(payload) ? payload.toString('utf8') : payload == null ? '' : null;
    if (reply.statusCode >= 500 || body === null) {
      const failure = failures.get(request);
      if (failure && isOutcomeUnknown(failure)) {
        // It may yet have committed: the lease, no longer renewed, frees the key within leaseMs.
        request.log.warn({ reason: failure.message }, 'idempotency key kept until its lease lapses: the request failed not knowing whether it committed');
        return payload;
      }
      await store.release(owner).catch((err: Error) => request.log.error({ err }, 'releasing an idempotency key failed'));
      return payload;
    }
    const contentType = reply.getHeader('content-type');
    // Unrecorded, the key stays claimed: retries get 409, never a second run.
    await store
      .answer(owner, { status: reply.statusCode, body, contentType: typeof contentType === 'string' ? contentType : null })
      .catch((err: Error) => request.log.error({ err }, 'recording the answer to an idempotent request failed'));
    return payload;
  };

  scope.addHook('onRoute', (route) => {
    if (!route.config?.idempotency) return;
    route.preHandler = [...asList(route.preHandler), preHandler];
    route.onError = [...asList(route.onError), onError];
    route.onSend = [...asList(route.onSend), onSend];
  });
}

function asList<T>(hooks: T | T[] | undefined): T[] {
  if (hooks === undefined) return [];
  return Array.isArray(hooks) ? hooks : [hooks];
}

/**
 * sha256 of the method, the URL and the validated body with object keys sorted (so key order
 * and whitespace do not matter); file bytes (multipart images) enter as their own sha256.
 */
function fingerprintOf(request: FastifyRequest): string {
  const hash = createHash('sha256');
  hash.update(`${request.method} ${request.url}\n`);
  hash.update(canonical(request.body));
  return hash.digest('hex');
}

/**
 * The canonical text of a body, written with a stack of its own rather than recursion: a body
 * nested a million levels deep (within the body limit) is fingerprinted like any other, and
 * left for its route to refuse.
 */
function canonical(root: unknown): string {
  const out: string[] = [];
  // Popped last first: a value to write, or text written as it is.
  const work: ({ text: string } | { value: unknown })[] = [{ value: root }];
  for (let item = work.pop(); item; item = work.pop()) {
    if ('text' in item) {
      out.push(item.text);
      continue;
    }
    const { value } = item;
    if (Buffer.isBuffer(value)) {
      out.push(`b:${createHash('sha256').update(value).digest('hex')}`);
    } else if (Array.isArray(value)) {
      const parts = value.flatMap((element, index) => (index === 0 ? [{ value: element }] : [{ text: ',' }, { value: element }]));
      work.push({ text: ']' }, ...parts.reverse(), { text: '[' });
    } else if (value !== null && typeof value === 'object') {
      const parts = Object.keys(value)
        .sort()
        .flatMap((key, index) => [...(index === 0 ? [] : [{ text: ',' }]), { text: `${JSON.stringify(key)}:` }, { value: (value as Record<string, unknown>)[key] }]);
      work.push({ text: '}' }, ...parts.reverse(), { text: '{' });
    } else {
      out.push(JSON.stringify(value) ?? 'undefined');
    }
  }
  return out.join('');
}
