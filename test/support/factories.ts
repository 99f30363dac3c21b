import { randomBytes } from 'node:crypto';
import { QueryTypes } from 'sequelize';
import type { Database } from '../../shared/db';
import { generateApiToken, hashApiToken } from '../../services/api/src/users/api-token';

export interface TestUser {
  user: { userId: number; userName: string; userEmail: string; quotaLimit: number };
  /** The plaintext bearer token; only its hash is stored. */
  token: string;
  /** Authorization and user_id headers for this user. */
  headers: Record<string, string>;
}

/**
 * Inserts a user with a fresh token. Overrides: userName, userEmail, quotaLimit (0 = unlimited).
 */
export async function createUser(
  db: Database,
  overrides: Partial<{ userName: string; userEmail: string; quotaLimit: number }> = {},
): Promise<TestUser> {
  const token = generateApiToken();
  const unique = randomBytes(4).toString('hex');
  const userName = overrides.userName ?? `User ${unique}`;
  const userEmail = overrides.userEmail ?? `user-${unique}@example.com`;
  const quotaLimit = overrides.quotaLimit ?? 0;
  const [{ user_id: userId }] = await db.sequelize.query<{ user_id: number }>(
    'INSERT INTO users (user_name, user_email, api_token_hash, quota_limit) VALUES ($1, $2, $3, $4) RETURNING user_id',
    { bind: [userName, userEmail, hashApiToken(token), quotaLimit], type: QueryTypes.SELECT },
  );
  return { user: { userId, userName, userEmail, quotaLimit }, token, headers: { authorization: `Bearer ${token}`, user_id: String(userId) } };
}

let postNumber = 0;

/** A valid post body for Layout B (`title`, `content`); Layout A's create names the content `body`. */
export function buildPost(overrides: Partial<{ title: unknown; content: unknown }> = {}): { title: unknown; content: unknown } {
  postNumber += 1;
  return { title: `Post number ${postNumber}`, content: `The content of post ${postNumber}.`, ...overrides };
}
