import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { Config } from '../../../../shared/config';
import type { ErrorBody } from '../error-handler';
import type { ImageStore } from '../../../../shared/posts/images/image-store';
import type { AuthenticatedUser } from '../plugins/auth';
import type { CredentialStore } from '../plugins/credential-store';
import type { PostReader } from '../posts/cached-post-reader';
import type { PostsRepository } from '../../../../shared/posts/posts-repository';

/** What every route plugin mounted under /api/v1 receives as its options. */
export interface ApiRouteOptions {
  config: Config;
  posts: PostsRepository;
  /** Layout A's cached reads (plain repository reads in Layout B). */
  postReader: PostReader;
  images: ImageStore;
}

/**
 * A route plugin served under /api/v1 behind the layout's auth hook (`request.principal` is
 * set: a user or a service key; `request.user` too for a user) and its error handler (throw
 * an ApiError for a 4xx in the layout's shape). The posts routes take users only.
 */
export type ApiRoutes = FastifyPluginAsync<ApiRouteOptions>;

/** One layout: its error shape, its /api/v1 plugin and its posts routes. */
export interface Layout {
  errorBody: ErrorBody;
  /** Mounts `routes` behind the layout's auth (over `credentials`), plus its unknown-endpoint answer. */
  plugin: FastifyPluginAsync<ApiRouteOptions & { routes: ApiRoutes[]; credentials: CredentialStore}>;
  postsRoutes: ApiRoutes;
}

/** The caller of an authenticated route. */
export function currentUser(request: FastifyRequest): AuthenticatedUser {
  if (!request.user) throw new Error(`${request.method} ${request.url}: route is not behind the auth hook`);
  return request.user;
}
