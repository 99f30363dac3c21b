import { QueryTypes } from 'sequelize';
import type { Database } from '../../../shared/db';

// Raw reads for assertions. Not the models: shared/db binds the model classes to the most
// recently created connection, and every app a test builds creates its own.

export interface PostRow {
  pid: number;
  postUuid: string;
  userId: number;
  postTitle: string;
  postBody: string;
  postImage: string | null;
  createdAt: Date;
  updatedAt: Date;
}

export interface UserRow {
  userId: number;
  userName: string;
  userEmail: string;
  apiTokenHash: string | null;
  quotaLimit: number;
  quotaUsed: number;
}

export async function findPost(db: Database, pid: number): Promise<PostRow | null> {
  const [row] = await db.sequelize.query<PostRow>(
    `SELECT pid, post_uuid AS "postUuid", user_id AS "userId", post_title AS "postTitle", post_body AS "postBody",
            post_image AS "postImage", created_at AS "createdAt", updated_at AS "updatedAt"
     FROM posts WHERE pid = $1`,
    { bind: [pid], type: QueryTypes.SELECT },
  );
  return row ?? null;
}

export async function countPosts(db: Database): Promise<number> {
  const [{ count }] = await db.sequelize.query<{ count: string }>('SELECT count(*) AS count FROM posts', { type: QueryTypes.SELECT });
  return Number(count);
}

export async function findUser(db: Database, userId: number): Promise<UserRow | null> {
  const [row] = await db.sequelize.query<UserRow>(
    `SELECT user_id AS "userId", user_name AS "userName", user_email AS "userEmail", api_token_hash AS "apiTokenHash",
            quota_limit AS "quotaLimit", quota_used AS "quotaUsed"
     FROM users WHERE user_id = $1`,
    { bind: [userId], type: QueryTypes.SELECT },
  );
  return row ?? null;
}
