import type { PostChangedData, PostDeletedData } from './post-events';

/** A post as both layouts and the cache see it; times are ISO 8601 strings so a cached copy is identical. */
export interface PostRecord {
  pid: number;
  uuid: string;
  userId: number;
  title: string;
  content: string;
  /** The stored file name under UPLOAD_DIR, or null. */
  image: string | null;
  createdAt: string;
  updatedAt: string;
}

/** A `posts` row as PostgreSQL returns it. */
export interface PostRow {
  pid: number;
  post_uuid: string;
  user_id: number;
  post_title: string;
  post_body: string;
  post_image: string | null;
  created_at: Date;
  updated_at: Date;
}

/** The column list every query selects, in {@link PostRow} order. */
export const POST_COLUMNS = 'pid, post_uuid, user_id, post_title, post_body, post_image, created_at, updated_at';

export function toPostRecord(row: PostRow): PostRecord {
  return {
    pid: row.pid,
    uuid: row.post_uuid,
    userId: row.user_id,
    title: row.post_title,
    content: row.post_body,
    image: row.post_image,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

export function toChangedData(post: PostRecord): PostChangedData {
  return {
    pid: post.pid,
    uuid: post.uuid,
    user_id: post.userId,
    title: post.title,
    content: post.content,
    image: post.image,
    created_at: post.createdAt,
    updated_at: post.updatedAt,
  };
}

export function toDeletedData(post: PostRecord): PostDeletedData {
  return { pid: post.pid, uuid: post.uuid, user_id: post.userId };
}

/** PostgreSQL's INTEGER range: a larger id in a URL names no post rather than failing the query. */
export function isStorablePid(pid: number): boolean {
  return Number.isSafeInteger(pid) && pid >= 1 && pid <= 2_147_483_647;
}
