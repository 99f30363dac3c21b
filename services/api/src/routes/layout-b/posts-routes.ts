import type { FastifyRequest } from 'fastify';
import { isDatabaseUnavailable } from '../../../../../shared/db';
import { RequestValidationError } from '../../errors';
import { idempotencyClaimOf } from '../../plugins/idempotency';
import { RecordedPostGoneError } from '../../../../../shared/posts/errors';
import { joiValidatorCompiler } from '../../schemas/joi-validation';
import { createPostSchemaB, deletePostSchemaB, getPostB, listPostsB, updatePostSchemaB } from '../../schemas/layout-b';
import { ApiRoutes, currentUser } from '../api-routes';
import { presentPostB } from './present';

type IdParams = { Params: { id: number } };
type WriteBody = { Body: { title: string; content: string } };

const ID = ':id(^\\d+$)';
const NO_POST = { message: 'No post found.' };

/**
 * The validator's line for a field rule, which Layout B answers in its 200 status body.
 * Shape errors (not an object, unknown field) are rethrown for the error handler's 400.
 */
function fieldRuleMessage(request: FastifyRequest): string | null {
  const error = request.validationError;
  if (!error) return null;
  if (error instanceof RequestValidationError && !error.structural && error.validationContext === 'body') return error.message;
  throw error;
}

/** Layout B's posts routes (docs/design.md §5): HTTP only, over the shared repository, uncached. */
export const postsRoutesB: ApiRoutes = async (app, { posts }) => {
  app.setValidatorCompiler(joiValidatorCompiler);

  app.get<{ Querystring: { limit: number; offset: number } }>('/posts', { schema: listPostsB() }, async (request, reply) => {
    const page = await posts.listLayoutB(request.query.limit, request.query.offset);
    if (!page) return reply.code(404).send(NO_POST);
    // Already the 200 schema's JSON: a string (or a big page's stream of it) with a JSON content type is sent as it is.
    return reply.header('X-Total-Count', page.total).type('application/json; charset=utf-8').send(page.json);
  });

  app.get<IdParams>(`/posts/${ID}`, { schema: getPostB() }, async (request, reply) => {
    const post = await posts.findById(request.params.id);
    return post ? presentPostB(post) : reply.code(404).send(NO_POST);
  });

  app.post<WriteBody>('/posts', { schema: createPostSchemaB(), attachValidation: true, config: { idempotency: true } }, async (request) => {
    const invalid = fieldRuleMessage(request);
    if (invalid) return { status: 2011, message: invalid };
    try {
      // A retry of a create whose process died after committing answers with that post (docs/design.md §15).
      const claim = idempotencyClaimOf(request);
      const pid = claim?.committedPostPid ?? (await posts.create({ userId: currentUser(request).userId, ...request.body, image: null }, 'random', claim)).pid;
      return { status: 2001, message: 'Post added successfully.', pid: String(pid) };
    } catch (err) {
      // Another holder of the key made the post, since deleted: its pid was the answer.
      if (err instanceof RecordedPostGoneError) return { status: 2001, message: 'Post added successfully.', pid: String(err.pid) };
      // An outage is not a failed insert: the error handler answers 503 with Retry-After.
      if (isDatabaseUnavailable(err)) throw err;
      request.log.error({ err }, 'post insert failed');
      return { status: 2011, message: 'Unable to add post.' };
    }
  });

  app.put<IdParams & WriteBody>(`/posts/${ID}`, { schema: updatePostSchemaB(), attachValidation: true }, async (request) => {
    const invalid = fieldRuleMessage(request);
    if (invalid) return { status: 4011, message: invalid };
    const updated = await posts.update(request.params.id, currentUser(request).userId, request.body).catch((err) => {
      if (isDatabaseUnavailable(err)) throw err;
      request.log.error({ err }, 'post update failed');
      return null;
    });
    return updated ? { status: 2001, message: 'Post updated successfully.' } : { status: 4011, message: 'Unable to update post.' };
  });

  app.delete<IdParams>(`/posts/${ID}`, { schema: deletePostSchemaB() }, async (request) => {
    const deleted = await posts.delete(request.params.id, currentUser(request).userId).catch((err) => {
      if (isDatabaseUnavailable(err)) throw err;
      request.log.error({ err }, 'post delete failed');
      return null;
    });
    // 2001 for both outcomes is the spec's table, kept as written (docs/design.md §5).
    return { status: 2001, message: deleted ? 'Post deleted successfully.' : 'Unable to delete post.' };
  });
};
