import { createHash } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import Joi from 'joi';
import type { Sequelize, Transaction } from 'sequelize';
import { endPortalSessions } from '../../../../shared/auth/portal-sessions';
import type { PostDeletions } from '../../../../shared/posts/post-deletions';
import type { AfterCommit } from '../inbox';

/** Events that create or update a user (upsert by user_id). */
const UPSERT_EVENTS = new Set(['user.created', 'user.registered', 'user.updated']);

/** A user event's `_data`, normalised from the shapes senders use (see {@link normaliseUser}). */
interface UserInput {
  user_id: number;
  name?: string;
  email?: string;
  token?: string | null;
  quota_limit?: number;
}

const userSchema = Joi.object<UserInput>({
  user_id: Joi.number().integer().min(1).max(99999).required(),
  name: Joi.string().trim().min(1).max(255),
  email: Joi.string().trim().email({ tlds: false }).max(320),
  token: Joi.string().min(16).max(512).allow(null),
  quota_limit: Joi.number().integer().min(0),
});

// Only the given fields change; a given token (null included) replaces the stored hash.
const UPDATE_SQL = `
  UPDATE users SET
    user_name = COALESCE(:name, user_name),
    user_email = COALESCE(:email, user_email),
    api_token_hash = CASE WHEN :tokenGiven THEN :tokenHash ELSE api_token_hash END,
    quota_limit = COALESCE(:quotaLimit, quota_limit),
    updated_at = now()
  WHERE user_id = :userId`;

// A new user; a concurrent insert of the same id turns into the update above.
const INSERT_SQL = `
  INSERT INTO users (user_id, user_name, user_email, api_token_hash, quota_limit)
  VALUES (:userId, :name, :email, :tokenHash, COALESCE(:quotaLimit, 0))
  ON CONFLICT (user_id) DO UPDATE SET
    user_name = EXCLUDED.user_name,
    user_email = EXCLUDED.user_email,
    api_token_hash = CASE WHEN :tokenGiven THEN EXCLUDED.api_token_hash ELSE users.api_token_hash END,
    quota_limit = CASE WHEN :quotaLimit IS NULL THEN users.quota_limit ELSE EXCLUDED.quota_limit END,
    updated_at = now()`;

/** A verified user event whose `_data` has the wrong shape; answered like any failure (500, logged). */
export class UserEventError extends Error {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, options);
    this.name = 'UserEventError';
  }
}

/** What {@link applyUserEvent} works with. */
export interface UserEventDeps {
  sequelize: Sequelize;
  /** The api's posts repository: deletes a user's posts as the api would (events, cache, images). */
  posts: PostDeletions;
  /**
   * Tells every api process that the user's credentials changed (deleted, token replaced or
   * revoked), so none keeps accepting a cached token. Called after the commit.
   */
  credentialsChanged(userId: number): Promise<void>;
  log: FastifyBaseLogger;
}

/** What one user event came to: whether it applied, and what must follow the commit. */
export interface UserEventOutcome {
  result: 'applied' | 'ignored';
  /** Run once the inbox transaction commits; never throws (failures are logged). */
  afterCommit?: AfterCommit;
}

/**
 * Applies one verified user event to `users` inside the inbox transaction.
 * - `user.created`, `user.registered`, `user.updated`: upsert by user id. `_data` is
 *   `{user_id, name?, email?, token?, quota_limit?}`, or the same under a `user` key (the
 *   shape of Luminova's examples and docs/design.md §7's vector: `{"status":"OK","user":{"id":42,
 *   "email":".."}}`); `id`/`userId`, `user_name`/`userName`, `user_email`/`userEmail` and
 *   `quotaLimit` are accepted too. An existing user changes only in the fields given; a new
 *   one needs an email and is named by it when no name is given. A given `token` is stored
 *   only as its sha256 hex (the api's bearer token); `token: null` revokes it.
 * - `user.deleted`: the same id forms; the user's posts go first, through the posts
 *   repository, each recorded as a `post.deleted` event in the outbox (the api's relay queues
 *   it: the receiver has no queue); after the commit their cache entries and image files go.
 *   Deleting an unknown user is not an error.
 * A given `token` (null included) also ends the user's portal sessions, in the same
 * transaction. After the commit of a deletion or of a given `token`, the api processes are
 * told the user's credentials changed (`credentialsChanged`).
 *
 * @returns `applied` (with the after-commit step), or `ignored` for any other `user.*` event
 * @throws UserEventError when `_data` has no valid user id or a field of the wrong type, or a
 *   new user has no email; database errors (such as an e-mail address another user already
 *   has) as they come
 */
export async function applyUserEvent(
  deps: UserEventDeps,
  event: string | null,
  data: unknown,
  transaction: Transaction,
): Promise<UserEventOutcome> {
  if (event === null || (event !== 'user.deleted' && !UPSERT_EVENTS.has(event))) return { result: 'ignored' };
  const { sequelize } = deps;
  const input = validate(normaliseUser(data), event);
  if (event === 'user.deleted') {
    // Posts first: a cascade from the user would drop them without their post.deleted events.
    const posts = await deps.posts.deleteAllByOwner(input.user_id, transaction);
    await sequelize.query('DELETE FROM users WHERE user_id = :userId', { replacements: { userId: input.user_id }, transaction });
    return {
      result: 'applied',
      afterCommit: async () => {
        await deps.posts.forgetDeleted(posts);
        await reportCredentialChange(deps, input.user_id);
      },
    };
  }
  const replacements = {
    userId: input.user_id,
    name: input.name ?? null,
    email: input.email ?? null,
    tokenHash: typeof input.token === 'string' ? sha256(input.token) : null,
    tokenGiven: input.token !== undefined,
    quotaLimit: input.quota_limit ?? null,
  };
  const afterCommit = replacements.tokenGiven ? () => reportCredentialChange(deps, input.user_id) : undefined;
  const [, updated] = await sequelize.query(UPDATE_SQL, { replacements, transaction });
  if ((updated as { rowCount?: number }).rowCount !== 1) {
    if (!input.email) throw new UserEventError(`Invalid ${event} payload: a new user needs an email`);
    await sequelize.query(INSERT_SQL, { replacements: { ...replacements, name: input.name ?? input.email }, transaction });
  }
  // A session must not outlive the token it came with (docs/design.md §11.6).
  if (replacements.tokenGiven) await endPortalSessions(sequelize, input.user_id, transaction);
  return { result: 'applied', afterCommit };
}

// The change is committed either way; a lost announcement is logged for the operator.
async function reportCredentialChange(deps: UserEventDeps, userId: number): Promise<void> {
  await deps.credentialsChanged(userId).catch((err) => deps.log.error({ err, userId }, 'announcing a credential change failed'));
}

/**
 * Maps the field names senders use onto ours; the first name present wins. Anything that is
 * not an object passes through unchanged, for the schema to refuse.
 */
function normaliseUser(data: unknown): unknown {
  if (!isRecord(data)) return data;
  const source = isRecord(data.user) ? data.user : data;
  const pick = (...keys: string[]) => keys.map((key) => source[key]).find((value) => value !== undefined);
  const fields = {
    user_id: pick('user_id', 'id', 'userId'),
    name: pick('name', 'user_name', 'userName'),
    email: pick('email', 'user_email', 'userEmail'),
    token: pick('token'),
    quota_limit: pick('quota_limit', 'quotaLimit'),
  };
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined));
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function validate(data: unknown, event: string): UserInput {
  const { value, error } = userSchema.validate(data);
  if (error) throw new UserEventError(`Invalid ${event} payload: ${error.message}`, { cause: error });
  return value;
}

function sha256(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}
