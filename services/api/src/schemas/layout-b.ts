import { AUTHENTICATED, messageSchema, postIdParamsSchema } from './common';
import { validatedBy } from './joi-validation';
import { CONTENT_MAX_CHARACTERS, pageQuery, pageQueryShortcut, TITLE_MAX_CHARACTERS, writePostB, writePostBShortcut } from './post-input';

// Route schemas of Layout B (docs/design.md §5): JSON Schema for OpenAPI and response serialisation,
// Joi (attached by validatedBy) for request validation. Factories, so each app compiles its own.

const tags = ['posts (layout b)'];
const COMMON_ERRORS = { 401: messageSchema('Bad credentials') };

const post = {
  type: 'object',
  properties: {
    pid: { type: 'string', description: 'The post id, as a string (the Layout B model)' },
    title: { type: 'string' },
    content: { type: 'string' },
    created_at: { type: 'string', format: 'date-time' },
    updated_at: { type: 'string', format: 'date-time' },
  },
  required: ['pid', 'title', 'content', 'created_at', 'updated_at'],
};

const outcome = (description: string) => ({
  description,
  type: 'object',
  properties: { status: { type: 'integer', description: '2001 success, 2011 create failed, 4011 update failed' }, message: { type: 'string' }, pid: { type: 'string' } },
  required: ['status', 'message'],
});

const writeBody = () =>
  validatedBy(
    { type: 'object', properties: { title: { type: 'string', maxLength: TITLE_MAX_CHARACTERS }, content: { type: 'string', maxLength: CONTENT_MAX_CHARACTERS } }, required: ['title', 'content'] },
    writePostB,
    writePostBShortcut,
  );

export function listPostsB() {
  return {
    tags,
    summary: 'List posts, newest first (X-Total-Count: all posts)',
    operationId: 'listPosts',
    description:
      "A page of posts, newest first, with `X-Total-Count` giving all posts; 404 when there is none. Needs the user's bearer token and user id.",
    security: AUTHENTICATED,
    querystring: validatedBy(
      {
        type: 'object',
        properties: { limit: { type: 'integer', minimum: 1, maximum: 1000, default: 100 }, offset: { type: 'integer', minimum: 0, default: 0 } },
      },
      pageQuery(100, 1000),
      pageQueryShortcut(100, 1000),
    ),
    response: { 200: { type: 'array', items: post }, 400: messageSchema('Bad limit or offset'), 404: messageSchema('No post found'), ...COMMON_ERRORS },
  };
}

export function getPostB() {
  return {
    tags,
    summary: 'Read one post',
    operationId: 'getPost',
    description:
      "One post by its id; 404 when there is none. Needs the user's bearer token and user id.",
    security: AUTHENTICATED,
    params: postIdParamsSchema(),
    response: { 200: post, 404: messageSchema('No post found'), ...COMMON_ERRORS },
  };
}

export function createPostSchemaB() {
  return {
    tags,
    summary: 'Create a post (JSON or urlencoded form); always HTTP 200',
    operationId: 'createPost',
    description:
      "Creates a post owned by the caller from JSON or an urlencoded form; the outcome is in the body's `status` (2001 created, 2011 invalid), the HTTP status is always 200. Emits `post.created`.",
    security: AUTHENTICATED,
    consumes: ['application/json', 'application/x-www-form-urlencoded'],
    body: writeBody(),
    response: { 200: outcome('2001 with the new pid, or 2011 with the reason'), 400: messageSchema('Malformed body'), ...COMMON_ERRORS },
  };
}

export function updatePostSchemaB() {
  return {
    tags,
    summary: 'Replace title and content of your post; always HTTP 200',
    operationId: 'updatePost',
    description:
      "Replaces the title and content of one of the caller's own posts; the outcome is in the body's `status` (2001 updated, 4011 invalid). Emits `post.updated`.",
    security: AUTHENTICATED,
    consumes: ['application/json', 'application/x-www-form-urlencoded'],
    params: postIdParamsSchema(),
    body: writeBody(),
    response: { 200: outcome('2001, or 4011 with the reason'), 400: messageSchema('Malformed body'), ...COMMON_ERRORS },
  };
}

export function deletePostSchemaB() {
  return {
    tags,
    summary: 'Delete your post; always HTTP 200',
    operationId: 'deletePost',
    description:
      "Deletes one of the caller's own posts; the outcome is in the body's `status`. Emits `post.deleted`.",
    security: AUTHENTICATED,
    params: postIdParamsSchema(),
    response: { 200: outcome('2001, deleted or not'), ...COMMON_ERRORS },
  };
}
