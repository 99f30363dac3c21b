import type { FastifyPluginAsync } from 'fastify';
import { getOverviewStats } from '../../../../shared/operations';
import type { ListReader } from '../plugins/list-reader';
import { visibilityFor } from '../plugins/principal';
import { joiValidatorCompiler } from '../schemas/joi-validation';
import { handleOperationsError, operatorOrUser } from './operations-errors';
import { SECURITY, errorResponses } from './operations-schemas';
import { StatsQuery, overviewStatsObject, statsQuery } from './stats-schemas';

/**
 * `GET /api/v1/stats?series=1h|24h` (docs/design.md §14.1): the health of every endpoint the caller may
 * see, together: an operator's key with `endpoints:read` sees all endpoints, a user their own.
 * Read where `lists` says (the replica, docs/design.md §13.3).
 */
export const statsRoutes: FastifyPluginAsync<{ lists: ListReader }> = async (app, { lists }) => {
  app.setValidatorCompiler(joiValidatorCompiler);
  app.setErrorHandler(handleOperationsError);

  app.get<{ Querystring: StatsQuery }>(
    '/stats',
    {
      preValidation: operatorOrUser('endpoints:read'),
      schema: {
        tags: ['endpoints'],
        summary: 'The health of all your endpoints over the last 24 hours; with `?series=1h|24h` their attempts per interval for charts',
        operationId: 'getStats',
        description:
          'Success rate, attempt counts and latency percentiles over all visible endpoints in the last 24 hours, and with `series` their counts per interval for charts.',
        security: SECURITY,
        querystring: statsQuery,
        response: { 200: overviewStatsObject, ...errorResponses(403) },
      },
    },
    async (request) => {
      const viewer = visibilityFor(request, 'endpoints:read');
      return lists.read(request, (reader) => getOverviewStats(reader, viewer, request.query.series));
    },
  );
};
