import { randomUUID } from 'node:crypto';
import Fastify from 'fastify';
import { Pool } from 'pg';
import { POST_COLUMNS, PostRow, toPostRecord } from '../shared/posts/post-record';

/**
 * The API baseline, run as its own process: a minimal hand-written Fastify + pg server over
 * the same `posts` table (no ORM, no auth, no cache, no outbox), answering GET one post,
 * list (newest first) and insert. Environment: DATABASE_URL, PORT, POOL_MAX (default 10, as
 * our api). Listens on 127.0.0.1 and tells its parent over IPC when it is listening. Posts are
 * answered in the api's record shape (shared/posts/post-record.ts, which loads nothing at run time).
 */

const pool = new Pool({ connectionString: process.env.DATABASE_URL, max: Number(process.env.POOL_MAX ?? 10) });
const app = Fastify();

app.get<{ Params: { id: string } }>('/posts/:id', async (request, reply) => {
  const { rows } = await pool.query<PostRow>(`SELECT ${POST_COLUMNS} FROM posts WHERE pid = $1`, [Number(request.params.id)]);
  if (rows.length === 0) return reply.code(404).send({ message: 'No post found.' });
  return toPostRecord(rows[0]);
});

app.get<{ Querystring: { limit?: string; offset?: string } }>('/posts', async (request) => {
  const limit = Math.min(100, Math.max(1, Number(request.query.limit ?? 10)));
  const offset = Math.max(0, Number(request.query.offset ?? 0));
  const { rows } = await pool.query<PostRow>(
    `SELECT ${POST_COLUMNS} FROM posts ORDER BY created_at DESC, pid DESC LIMIT $1 OFFSET $2`,
    [limit, offset],
  );
  return rows.map(toPostRecord);
});

app.post<{ Body: { title: string; content: string; userId: number } }>('/posts', async (request) => {
  const { title, content, userId } = request.body;
  const { rows } = await pool.query<{ pid: number }>(
    'INSERT INTO posts (post_uuid, user_id, post_title, post_body) VALUES ($1, $2, $3, $4) RETURNING pid',
    [randomUUID(), userId, title, content],
  );
  return { pid: rows[0].pid };
});

app.listen({ port: Number(process.env.PORT ?? 0), host: '127.0.0.1' }).then(
  () => process.send?.({ ready: true }),
  (error: unknown) => {
    process.stderr.write(`baseline server failed to start: ${String(error)}\n`);
    process.exit(1);
  },
);
process.once('SIGTERM', () => {
  void app
    .close()
    .then(() => pool.end())
    .finally(() => process.exit(0));
});
