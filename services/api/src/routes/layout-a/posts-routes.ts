import type { FastifyReply } from 'fastify';
import { ApiError } from '../../errors';
import { idempotencyClaimOf } from '../../plugins/idempotency';
import { RecordedPostGoneError } from '../../../../../shared/posts/errors';
import type { PostRecord } from '../../../../../shared/posts/post-record';
import type { PostPage } from '../../../../../shared/posts/posts-repository';
import { joiValidatorCompiler } from '../../schemas/joi-validation';
import { createPostSchemaA, deletePostSchemaA, getPostA, listPostsA, updatePostSchemaA } from '../../schemas/layout-a';
import { ApiRoutes, currentUser } from '../api-routes';
import { readMultipartBody } from './multipart-body';
import { createLayoutAPresenter } from './present';

type IdParams = { Params: { id: number } };
type CreateBody = { title: string; body: string; userId: number; image?: Buffer };

// find-my-way pattern: the spec's {post_id} is an integer segment; anything else is an unknown endpoint.
const ID = ':id(^\\d+$)';
const JSON_UTF8 = 'application/json; charset=utf-8';

/** When the request arrived, `performance.now()` ms (Fastify's own start of the request). */
const arrivalOf = (reply: FastifyReply) => performance.now() - reply.elapsedTime;

/** Layout A's posts routes (docs/design.md §5): HTTP only, over the shared repository and Layout A's cached reads. */
export const postsRoutesA: ApiRoutes = async (app, { config, posts, postReader, images }) => {
  app.setValidatorCompiler(joiValidatorCompiler);
  const present = createLayoutAPresenter(config.appUrl);

  // The reader hands out the same frozen page or record while it is current: its answer is serialised once.
  const answers = new WeakMap<PostPage | PostRecord, string>();
  const answer = (reply: FastifyReply, read: PostPage | PostRecord, body: () => object) => {
    let json = answers.get(read);
    if (json === undefined) {
      json = reply.serialize(body()) as string;
      answers.set(read, json);
    }
    return reply.type(JSON_UTF8).send(json);
  };

  app.get<{ Querystring: { limit: number; offset: number } }>('/posts', { schema: listPostsA() }, async (request, reply) => {
    const page = await postReader.list(request.query.limit, request.query.offset, arrivalOf(reply));
    if (page.posts.length === 0) return reply.code(204).send();
    return answer(reply, page, () => ({ status: 200, items: page.posts.map(present.listItem) }));
  });

  app.get<IdParams>(`/posts/${ID}`, { schema: getPostA() }, async (request, reply) => {
    const post = await postReader.findById(request.params.id, arrivalOf(reply));
    if (!post) return reply.code(204).send();
    return answer(reply, post, () => ({ status: 200, item: present.item(post) }));
  });

  app.post<{ Body: CreateBody }>(
    '/posts/create',
    { schema: createPostSchemaA(), preValidation: readMultipartBody, config: { idempotency: true } },
    async (request) => {
      const { title, body, userId, image } = request.body;
      if (userId !== currentUser(request).userId) throw new ApiError(403, 'userId must be the authenticated user.');
      // A retry of a create whose process died after committing answers with that post (docs/design.md §15).
      const claim = idempotencyClaimOf(request);
      const gone = (pid: number) => new ApiError(409, `The request with this Idempotency-Key created post ${pid}, which no longer exists.`);
      if (claim?.committedPostPid) {
        const committed = await posts.findById(claim.committedPostPid);
        if (!committed) throw gone(claim.committedPostPid);
        return { status: 200, message: 'Post was successfully created.', item: present.item(committed) };
      }
      const imageName = image ? await images.save(image) : null;
      const discardImage = async () => {
        if (imageName) await images.remove(imageName).catch((cleanup) => request.log.warn({ err: cleanup }, 'removing an orphaned image failed'));
      };
      try {
        // The post the key records, should another holder of it have made one meanwhile.
        const post = await posts.create({ userId, title, content: body, image: imageName }, 'sequence', claim);
        if (imageName && post.image !== imageName) await discardImage();
        return { status: 200, message: 'Post was successfully created.', item: present.item(post) };
      } catch (err) {
        await discardImage();
        throw err instanceof RecordedPostGoneError ? gone(err.pid) : err;
      }
    },
  );

  app.put<IdParams & { Body: { title?: string; content?: string } }>(
    `/posts/update/${ID}`,
    { schema: updatePostSchemaA() },
    async (request) => {
      const { id } = request.params;
      const updated = await posts.update(id, currentUser(request).userId, request.body);
      if (!updated) throw new ApiError(404, `Post ID: ${id} not found.`);
      return { status: 200, message: `Post ID: ${id} successfully updated.` };
    },
  );

  app.delete<IdParams>(`/posts/delete/${ID}`, { schema: deletePostSchemaA() }, async (request, reply) => {
    const { id } = request.params;
    if (!(await posts.delete(id, currentUser(request).userId))) throw new ApiError(404, `Post ID: ${id} not found.`);
    return reply.code(204).send();
  });
};
