import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import fastifyStatic from '@fastify/static';
import type { FastifyPluginAsync } from 'fastify';

/** Where the page is served; its scripts and styles live below `${DASHBOARD_PATH}/assets/`. */
export const DASHBOARD_PATH = '/dashboard';

/**
 * The charting library's files the page loads, served from the installed npm package (a
 * production dependency, so the image ships it): no CDN, and the same bytes the lockfile pins.
 * uPlot sizes its elements through the CSSOM (`element.style.width = ...`), which a
 * `style-src 'self'` policy allows, so the policy needs no inline-style exception.
 */
const VENDOR_FILES = ['uPlot.esm.js', 'uPlot.min.css'];
const VENDOR_PREFIX = `${DASHBOARD_PATH}/vendor/uplot/`;

/**
 * The page runs only its own files and talks only to this origin: no inline script or style,
 * no form posts elsewhere, framed only by `frameAncestors` (a CSP source list). API answers
 * are attacker-influenced (endpoint URLs, response excerpts), so the policy backs up the
 * page's rule of rendering them as text only.
 */
export function dashboardCsp(frameAncestors: string): string {
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "connect-src 'self'",
    "img-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    `frame-ancestors ${frameAncestors}`,
  ].join('; ');
}

/** The dashboard's policy: keys are typed there, so no page may frame it (clickjacking). */
export const DASHBOARD_CSP = dashboardCsp("'none'");

const SECURITY_HEADERS = {
  'Content-Security-Policy': DASHBOARD_CSP,
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'no-referrer',
};

/**
 * The dashboard's static files (docs/design.md §11.5): `services/api/dashboard/` from the project root.
 * Found by walking up to package.json, so the same code works from the TypeScript sources
 * (tests) and from `dist/` (the build compiles TypeScript only and leaves these files in place).
 *
 * @throws Error when no ancestor of this module holds package.json and the dashboard folder
 */
export function dashboardDirectory(from: string = __dirname): string {
  for (let dir = from; ; dir = path.dirname(dir)) {
    const candidate = path.join(dir, 'services', 'api', 'dashboard');
    if (existsSync(path.join(dir, 'package.json')) && existsSync(path.join(candidate, 'index.html'))) return candidate;
    if (path.dirname(dir) === dir) throw new Error(`dashboard files not found above ${from}`);
  }
}

/**
 * `GET /dashboard`: the operators' and users' web page over the public API of docs/design.md §11.5,
 * plus its assets at `/dashboard/assets/*` and the charting library's at `/dashboard/vendor/uplot/*`, every answer with a strict Content-Security-Policy.
 * The page holds no data and needs no authentication; it signs in against /api/v1 itself.
 * Register without a prefix; it is encapsulated, so its headers apply to its routes only.
 */
export const dashboardPlugin: FastifyPluginAsync<{ directory?: string }> = async (app, options) => {
  const directory = options.directory ?? dashboardDirectory();
  const page = readFileSync(path.join(directory, 'index.html'));
  app.addHook('onSend', async (_request, reply) => {
    reply.headers(SECURITY_HEADERS);
  });
  app.get(DASHBOARD_PATH, { schema: { hide: true } }, async (_request, reply) =>
    reply.type('text/html; charset=utf-8').header('Cache-Control', 'no-cache').send(page),
  );
  await app.register(fastifyStatic, {
    root: path.join(directory, 'assets'),
    prefix: `${DASHBOARD_PATH}/assets/`,
    decorateReply: false,
    index: false,
    // Revalidate by ETag: a new release's page never runs an old script.
    cacheControl: true,
    maxAge: 0,
  });
  await app.register(fastifyStatic, {
    root: path.dirname(require.resolve('uplot')),
    prefix: VENDOR_PREFIX,
    decorateReply: false,
    index: false,
    allowedPath: (pathName) => VENDOR_FILES.includes(pathName.replace(/^\//, '')),
    cacheControl: true,
    maxAge: 0,
  });
};
