import { createHash } from 'node:crypto';
import Joi from 'joi';
import type { Sequelize, Transaction } from 'sequelize';

/** Events that create or update a user (upsert by user_id). */
const UPSERT_EVENTS = new Set(['user.created', 'user.registered', 'user.updated']);

interface UpsertInput {
  user_id: number;
  name: string;
  email: string;
  token?: string | null;
  quota_limit?: number;
}

/** `_data` of user.created / user.registered / user.updated; other keys are ignored. */
const upsertSchema = Joi.object<UpsertInput>({
  user_id: Joi.number().integer().min(1).max(99999).required(),
  name: Joi.string().trim().min(1).max(255).required(),
  email: Joi.string().trim().email({ tlds: false }).max(320).required(),
  token: Joi.string().min(16).max(512).allow(null),
  quota_limit: Joi.number().integer().min(0),
}).unknown(true);

/** `_data` of user.deleted. */
const deleteSchema = Joi.object<{ user_id: number }>({
  user_id: Joi.number().integer().min(1).max(99999).required(),
}).unknown(true);

// A missing token or quota_limit keeps the stored value; a given one (token null included) replaces it.
const UPSERT_SQL = `
  INSERT INTO users (user_id, user_name, user_email, api_token_hash, quota_limit)
  VALUES (:userId, :name, :email, :tokenHash, COALESCE(:quotaLimit, 0))
  ON CONFLICT (user_id) DO UPDATE SET
    user_name = EXCLUDED.user_name,
    user_email = EXCLUDED.user_email,
    api_token_hash = CASE WHEN :tokenGiven THEN EXCLUDED.api_token_hash ELSE users.api_token_hash END,
    quota_limit = CASE WHEN :quotaGiven THEN EXCLUDED.quota_limit ELSE users.quota_limit END,
    updated_at = now()`;

/** A verified user event whose `_data` has the wrong shape; answered like any failure (500, logged). */
export class UserEventError extends Error {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, options);
    this.name = 'UserEventError';
  }
}

/**
 * Applies one verified user event to `users` inside the inbox transaction.
 * - `user.created`, `user.registered`, `user.updated`: upsert by `user_id` with
 *   `{user_id, name, email, token?, quota_limit?}`. A given `token` is stored only as its
 *   sha256 hex (the api's bearer token); `token: null` revokes it; a missing token or
 *   quota_limit leaves the stored value alone (0 = unlimited for a new user).
 * - `user.deleted`: `{user_id}`; the user's posts go with it (ON DELETE CASCADE). Deleting an
 *   unknown user is not an error.
 *
 * @returns `applied`, or `ignored` for any other `user.*` event
 * @throws UserEventError when `_data` does not match the event's shape; database errors (such
 *   as an e-mail address another user already has) as they come
 */
export async function applyUserEvent(
  sequelize: Sequelize,
  event: string | null,
  data: unknown,
  transaction: Transaction,
): Promise<'applied' | 'ignored'> {
  if (event === 'user.deleted') {
    const { user_id: userId } = validate(deleteSchema, data, event);
    await sequelize.query('DELETE FROM users WHERE user_id = :userId', { replacements: { userId }, transaction });
    return 'applied';
  }
  if (event === null || !UPSERT_EVENTS.has(event)) return 'ignored';
  const input = validate(upsertSchema, data, event);
  await sequelize.query(UPSERT_SQL, {
    replacements: {
      userId: input.user_id,
      name: input.name,
      email: input.email,
      tokenHash: typeof input.token === 'string' ? sha256(input.token) : null,
      tokenGiven: input.token !== undefined,
      quotaLimit: input.quota_limit ?? null,
      quotaGiven: input.quota_limit !== undefined,
    },
    transaction,
  });
  return 'applied';
}

function validate<T>(schema: Joi.ObjectSchema<T>, data: unknown, event: string): T {
  const { value, error } = schema.validate(data);
  if (error) throw new UserEventError(`Invalid ${event} payload: ${error.message}`, { cause: error });
  return value;
}

function sha256(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}
