import type { FastifyRequest } from 'fastify';

const ABSOLUTE_FORM = /^https?:\/\/[^/?#]*/i;

/**
 * The path of a request target as the router reads it: an absolute-form target
 * (`http://host/api/v1/posts`, RFC 9112 §3.2.2) loses its scheme and authority, the query goes,
 * and percent-encoding is decoded (a target that does not decode stays as it is).
 */
export function routerPathOf(target: string): string {
  const absolute = ABSOLUTE_FORM.exec(target);
  const path = (absolute ? target.slice(absolute[0].length) : target).split('?', 1)[0];
  try {
    return decodeURIComponent(path);
  } catch {
    return path;
  }
}

/**
 * Whether a request is for the posts routes under `prefix`, which act for a user and so refuse
 * service keys and portal sessions (docs/design.md §4). Decided by the route the router matched,
 * never by the raw target, which may spell the same route otherwise (`/api/v1/%70osts`, an
 * absolute form); a request no route matched (the unknown-endpoint answer) by its path as the
 * router read it.
 *
 * @param prefix - where the layout is mounted, e.g. `/api/v1`
 */
export function postsRouteTest(prefix: string): (request: FastifyRequest) => boolean {
  const posts = new RegExp(`^${prefix.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}/posts(?:/|$)`);
  return (request) => posts.test(request.routeOptions.url ?? routerPathOf(request.url));
}
