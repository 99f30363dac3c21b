import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { FastifyPluginAsync } from 'fastify';
import { PORTAL_PATH } from '../portal/portal-links';
import { dashboardCsp, dashboardDirectory } from './dashboard';

export interface PortalPageOptions {
  /** PORTAL_FRAME_ANCESTORS: origins that may embed the page, beside the api's own. */
  frameAncestors: string[];
  /** The dashboard's folder; default {@link dashboardDirectory}. */
  directory?: string;
}

/**
 * `GET /portal` (docs/design.md §11.6): the dashboard's page, which runs in portal mode at
 * this path (one user's view, opened by a link, no sign-in form). Its scripts and styles are
 * the dashboard's. Unlike `/dashboard`, where keys are typed, it may be embedded in an iframe
 * by the api's own origin and PORTAL_FRAME_ANCESTORS: `frame-ancestors 'self' <origins>` and
 * no X-Frame-Options (which cannot name origins, and would win over the policy in old browsers).
 */
export const portalPagePlugin: FastifyPluginAsync<PortalPageOptions> = async (app, options) => {
  const page = readFileSync(path.join(options.directory ?? dashboardDirectory(), 'index.html'));
  const headers = {
    'Content-Security-Policy': dashboardCsp(["'self'", ...options.frameAncestors].join(' ')),
    'X-Content-Type-Options': 'nosniff',
    'Referrer-Policy': 'no-referrer',
    'Cache-Control': 'no-cache',
  };
  app.get(PORTAL_PATH, { schema: { hide: true } }, async (_request, reply) => reply.headers(headers).type('text/html; charset=utf-8').send(page));
};
