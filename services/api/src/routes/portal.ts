import type { FastifyError, FastifyPluginAsync } from 'fastify';
import type { Sequelize } from 'sequelize';
import type { CredentialChange } from '../../../../shared/auth/credential-changes';
import { ApiError } from '../errors';
import { PortalLinkNotFoundError, PortalUserNotFoundError } from '../portal/errors';
import { createPortalLink, listPortalLinks, openPortalLink, revokePortalLink } from '../portal/portal-links';
import { requireServiceScope } from '../plugins/principal';
import { joiValidatorCompiler } from '../schemas/joi-validation';
import { handleOperationsError, serviceKeyWith } from './operations-errors';
import { SERVICE_KEY_SECURITY, errorResponses, pageOf } from './operations-schemas';
import {
  CreatePortalLinkBody,
  ListPortalLinksQuery,
  createPortalLinkBody,
  listPortalLinksQuery,
  mintedPortalLink,
  openPortalSessionBody,
  openedPortalSession,
  portalLinkObject,
  portalLinkParams,
} from './portal-schemas';

export interface PortalRoutesOptions {
  sequelize: Sequelize;
  /** APP_URL, the base of every link. */
  appUrl: string;
  /** Tells every api process of a revoked link (the credential-changes channel, docs/design.md §4). */
  announce(change: CredentialChange): Promise<unknown>;
}

const TAGS = ['portal'];
const REFUSED_LINK = 'This portal link is invalid, expired, revoked or already used.';

/**
 * The portal routes of docs/design.md §11.6 under /api/v1: a service key with `portal:write` mints
 * (`POST /portal-links`), lists (`GET /portal-links?user_id=`) and revokes
 * (`DELETE /portal-links/{id}`) one-time links into the dashboard for a user; the portal page
 * exchanges a link's token for a `ps_` session (`POST /portal-sessions`, no credentials:
 * the token is the credential; 401 for one unknown, used, revoked or expired).
 */
export const portalRoutes: FastifyPluginAsync<PortalRoutesOptions> = async (app, { sequelize, appUrl, announce }) => {
  app.setValidatorCompiler(joiValidatorCompiler);
  app.setErrorHandler(async (error: FastifyError) => {
    if (error instanceof PortalUserNotFoundError || error instanceof PortalLinkNotFoundError) throw new ApiError(404, error.message, { cause: error });
    return handleOperationsError(error);
  });

  app.post<{ Body: CreatePortalLinkBody }>(
    '/portal-links',
    {
      preValidation: serviceKeyWith('portal:write'),
      schema: {
        tags: TAGS,
        summary: "Mint a one-time link into the dashboard for one user (that user's endpoints and deliveries only)",
        operationId: 'createPortalLink',
        description:
          "Makes a one-time link that opens the dashboard as one user, seeing only that user's endpoints and deliveries. The link's token is in this answer only. Service keys with `portal:write`.",
        security: SERVICE_KEY_SECURITY,
        body: createPortalLinkBody,
        response: { 201: mintedPortalLink, ...errorResponses(403, 404) },
      },
    },
    async (request, reply) => {
      const key = requireServiceScope(request, 'portal:write');
      const { user_id: userId, scope, ttl_s: ttlS, session_ttl_s: sessionTtlS } = request.body;
      const link = await createPortalLink(sequelize, appUrl, { userId, scope, ttlS, sessionTtlS, createdByKeyId: key.keyId });
      request.log.info({ portalLinkId: link.id, userId, scope }, 'portal link minted');
      return reply.code(201).send(link);
    },
  );

  app.get<{ Querystring: ListPortalLinksQuery }>(
    '/portal-links',
    {
      preValidation: serviceKeyWith('portal:write'),
      schema: {
        tags: TAGS,
        summary: "A user's portal links, newest first, with their state (never their tokens)",
        operationId: 'listPortalLinks',
        description:
          "A user's portal links, newest first, with their state (unused, used, expired, revoked); never their tokens. Service keys with `portal:write`.",
        security: SERVICE_KEY_SECURITY,
        querystring: listPortalLinksQuery,
        response: { 200: pageOf(portalLinkObject), ...errorResponses(403) },
      },
    },
    async (request) => {
      const { user_id: userId, limit, cursor } = request.query;
      return listPortalLinks(sequelize, userId, { limit, cursor });
    },
  );

  app.delete<{ Params: { id: string } }>(
    '/portal-links/:id',
    {
      preValidation: serviceKeyWith('portal:write'),
      schema: {
        tags: TAGS,
        summary: 'Revoke a link: it no longer opens, and the session it opened ends in every api process within 1 s',
        operationId: 'revokePortalLink',
        description:
          'Revokes a portal link: it no longer opens, and the session it opened ends in every api process within 1 s. Service keys with `portal:write`.',
        security: SERVICE_KEY_SECURITY,
        params: portalLinkParams,
        response: { 204: { type: 'null', description: 'Revoked (also when it already was)' }, ...errorResponses(403, 404) },
      },
    },
    async (request, reply) => {
      const id = linkIdOf(request.params.id);
      if (!(await revokePortalLink(sequelize, id))) throw new PortalLinkNotFoundError(id);
      // Committed already; should Redis be away, no process caches (docs/design.md §4) and entries lapse within a minute.
      await announce({ kind: 'portal_link', id }).catch((err: Error) =>
        request.log.warn({ err, portalLinkId: id }, 'portal link revoked, but the api processes could not be told'),
      );
      return reply.code(204).send();
    },
  );

  app.post<{ Body: { token: string } }>(
    '/portal-sessions',
    {
      config: { public: true },
      schema: {
        tags: TAGS,
        summary: "Open a portal link: exchange its token (once) for a session as its user; the portal page does this",
        operationId: 'openPortalSession',
        description:
          "Exchanges a portal link's token, once, for a session token (`ps_...`) acting as the link's user within its scope; the portal page calls it.",
        security: [],
        body: openPortalSessionBody,
        response: { 201: openedPortalSession, ...errorResponses() },
      },
    },
    async (request, reply) => {
      const session = await openPortalLink(sequelize, request.body.token);
      if (!session) {
        request.log.info({ reason: 'portal_link_refused' }, 'authentication refused');
        throw new ApiError(401, REFUSED_LINK);
      }
      request.log.info({ userId: session.user_id, scope: session.scope }, 'portal link opened');
      return reply.code(201).send(session);
    },
  );
};

/** A link id from the path; anything but a positive 32-bit integer is simply not found. */
function linkIdOf(raw: string): number {
  const id = /^\d{1,10}$/.test(raw) ? Number(raw) : NaN;
  if (!(id >= 1 && id <= 2 ** 31 - 1)) throw new PortalLinkNotFoundError(0);
  return id;
}
