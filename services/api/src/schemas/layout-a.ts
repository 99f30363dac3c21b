import { AUTHENTICATED, EMPTY, messageSchema, postIdParamsSchema } from './common';
import { validatedBy } from './joi-validation';
import { CONTENT_MAX_CHARACTERS, createPostA, createPostAShortcut, pageQuery, pageQueryShortcut, TITLE_MAX_CHARACTERS, updatePostA } from './post-input';

// Route schemas of Layout A (docs/design.md §5): JSON Schema for OpenAPI and response serialisation,
// Joi (attached by validatedBy) for request validation. Factories, so each app compiles its own.

const tags = ['posts (layout a)'];
const error = (description: string) => messageSchema(description, { status: { type: 'integer' } });
const COMMON_ERRORS = { 401: error('Bad credentials, quota exceeded, or unknown endpoint') };

const listItem = {
  type: 'object',
  properties: {
    id: { type: 'integer' },
    uuid: { type: 'string', format: 'uuid' },
    userId: { type: 'integer' },
    title: { type: 'string' },
    body: { type: 'string' },
    image: { type: 'string', nullable: true, description: 'APP_URL/cdn/<file> or null' },
    link: { type: 'string', description: 'APP_URL/api/v1/posts/<id>' },
  },
  required: ['id', 'uuid', 'userId', 'title', 'body', 'image', 'link'],
};

const item = {
  type: 'object',
  properties: {
    postId: { type: 'integer' },
    uuid: { type: 'string', format: 'uuid' },
    userId: { type: 'integer' },
    title: { type: 'string' },
    body: { type: 'string' },
    image: { type: 'string', nullable: true },
    created_date: { type: 'string', format: 'date-time' },
    updated_date: { type: 'string', format: 'date-time' },
  },
  required: ['postId', 'uuid', 'userId', 'title', 'body', 'image', 'created_date', 'updated_date'],
};

export function listPostsA() {
  return {
    tags,
    summary: 'List posts, newest first',
    operationId: 'listPosts',
    description:
      "A page of posts, newest first, with `limit` and `offset`; 204 when the page is empty. Needs the user's bearer token and user id; counts against the user's daily quota.",
    security: AUTHENTICATED,
    querystring: validatedBy(
      {
        type: 'object',
        properties: {
          limit: { type: 'integer', minimum: 1, maximum: 100, default: 10 },
          offset: { type: 'integer', minimum: 0, default: 0 },
        },
      },
      pageQuery(10, 100),
      pageQueryShortcut(10, 100),
    ),
    response: {
      200: { type: 'object', properties: { status: { type: 'integer' }, items: { type: 'array', items: listItem } }, required: ['status', 'items'] },
      204: { ...EMPTY, description: 'No posts' },
      400: error('Bad limit or offset'),
      ...COMMON_ERRORS,
    },
  };
}

export function getPostA() {
  return {
    tags,
    summary: 'Read one post',
    operationId: 'getPost',
    description:
      "One post by its id; 204 when there is none. Needs the user's bearer token and user id.",
    security: AUTHENTICATED,
    params: postIdParamsSchema(),
    response: {
      200: { type: 'object', properties: { status: { type: 'integer' }, item }, required: ['status', 'item'] },
      204: { ...EMPTY, description: 'No such post' },
      ...COMMON_ERRORS,
    },
  };
}

export function createPostSchemaA() {
  return {
    tags,
    summary: 'Create a post (JSON, or multipart with an optional image)',
    operationId: 'createPost',
    description:
      'Creates a post owned by the caller, from JSON or from multipart/form-data with an optional image; an `Idempotency-Key` header makes a retry answer as the first call did. Emits `post.created`. ' +
      'multipart/form-data takes the fields title, body and userId, or one field `body` holding that JSON; ' +
      'the optional file `image` is a PNG, JPEG, GIF or WebP of at most 2 MB.',
    security: AUTHENTICATED,
    consumes: ['application/json', 'multipart/form-data'],
    body: validatedBy(
      {
        type: 'object',
        properties: {
          title: { type: 'string', maxLength: TITLE_MAX_CHARACTERS },
          body: { type: 'string', maxLength: CONTENT_MAX_CHARACTERS },
          userId: { type: 'integer', description: 'Must equal the authenticated user id' },
          image: { type: 'string', format: 'binary', description: 'multipart only' },
        },
        required: ['title', 'body', 'userId'],
      },
      createPostA,
      createPostAShortcut,
    ),
    response: {
      200: {
        type: 'object',
        properties: { status: { type: 'integer' }, message: { type: 'string' }, item },
        required: ['status', 'message', 'item'],
      },
      400: error('Validation failed'),
      403: error('userId is not the authenticated user'),
      413: error('Image or body too large'),
      415: error('Image is not png, jpeg, gif or webp, or unsupported content type'),
      500: error('Server error'),
      ...COMMON_ERRORS,
    },
  };
}

export function updatePostSchemaA() {
  return {
    tags,
    summary: 'Update your post',
    operationId: 'updatePost',
    description:
      "Changes the title and body of one of the caller's own posts. Emits `post.updated`.",
    security: AUTHENTICATED,
    params: postIdParamsSchema(),
    body: validatedBy(
      {
        type: 'object',
        properties: {
          title: { type: 'string', maxLength: TITLE_MAX_CHARACTERS },
          content: { type: 'string', maxLength: CONTENT_MAX_CHARACTERS },
          body: { type: 'string', maxLength: CONTENT_MAX_CHARACTERS, description: 'Same as content (the name create uses); if both are given they must be equal' },
        },
        minProperties: 1,
      },
      updatePostA,
    ),
    response: {
      200: { type: 'object', properties: { status: { type: 'integer' }, message: { type: 'string' } }, required: ['status', 'message'] },
      400: error('Validation failed'),
      404: error('No such post, or not yours'),
      ...COMMON_ERRORS,
    },
  };
}

export function deletePostSchemaA() {
  return {
    tags,
    summary: 'Delete your post',
    operationId: 'deletePost',
    description:
      "Deletes one of the caller's own posts; 204 on success. Emits `post.deleted`.",
    security: AUTHENTICATED,
    params: postIdParamsSchema(),
    response: { 204: { ...EMPTY, description: 'Deleted' }, 404: error('No such post, or not yours'), ...COMMON_ERRORS },
  };
}
