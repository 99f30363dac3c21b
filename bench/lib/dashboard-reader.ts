import { sleep } from './children';

/**
 * The reads of one dashboard view, as services/api/dashboard/assets/*.js make them when the
 * page is opened or a panel refreshed (it polls nothing on a timer): the overview's health
 * with the last hour's series (charts.js), the endpoint list and each listed endpoint's health
 * (endpoints.js), and the deliveries list (deliveries.js), 20 to a page, the three panels at
 * once. Every one of them reads where the list reader says (docs/design.md §13.3).
 */
export const VIEW_ROUTES = {
  overview: '/api/v1/stats?series=1h',
  endpoints: '/api/v1/endpoints?limit=20',
  endpointHealth: '/api/v1/endpoints/{id}/stats',
  deliveries: '/api/v1/webhooks?limit=20',
} as const;
export type ViewRoute = keyof typeof VIEW_ROUTES;

/** An operator's dashboard: the api's base URL and a service key allowed to read (`endpoints:read`, `webhooks:read`). */
export interface Dashboard {
  apiUrl: string;
  key: string;
}

/** What a run of views did. */
export interface ReaderResult {
  views: number;
  requests: number;
  /** Requests not answered 2xx (or not answered). */
  failed: number;
}

/** A reader running in the background until stopped. */
export interface RunningReader {
  /** Stops sending views, waits for those under way, and says what was done. */
  stop(): Promise<ReaderResult>;
}

/**
 * Opens `viewsPerS` dashboard views a second, open loop (view i starts at i / viewsPerS,
 * whether or not the earlier ones were answered), until stopped.
 */
export function startDashboardReader(dashboard: Dashboard, viewsPerS: number): RunningReader {
  const result: ReaderResult = { views: 0, requests: 0, failed: 0 };
  const underway = new Set<Promise<void>>();
  let stopped = false;
  const loop = (async () => {
    const started = performance.now();
    for (let i = 0; !stopped; i += 1) {
      const view = openView(dashboard, result).finally(() => underway.delete(view));
      underway.add(view);
      await sleep(Math.max(0, started + ((i + 1) * 1000) / viewsPerS - performance.now()));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      await Promise.all(underway);
      return result;
    },
  };
}

/**
 * Sends one route's GET one after the other for `seconds`, counting the requests.
 *
 * @throws Error when a request is not answered 2xx
 */
export async function repeatRoute(dashboard: Dashboard, path: string, seconds: number): Promise<number> {
  const until = performance.now() + seconds * 1000;
  let requests = 0;
  while (performance.now() < until) {
    const response = await get(dashboard, path);
    await response.arrayBuffer();
    if (!response.ok) throw new Error(`GET ${path}: ${response.status}`);
    requests += 1;
  }
  return requests;
}

/** One view: the three panels at once, the endpoints' health after their list. */
async function openView(dashboard: Dashboard, result: ReaderResult): Promise<void> {
  result.views += 1;
  const read = async (path: string): Promise<unknown> => {
    result.requests += 1;
    try {
      const response = await get(dashboard, path);
      if (response.ok) return await response.json();
      await response.arrayBuffer();
      result.failed += 1;
    } catch {
      result.failed += 1;
    }
    return undefined;
  };
  const endpoints = async () => {
    const page = (await read(VIEW_ROUTES.endpoints)) as { data?: { id: number }[] } | undefined;
    await Promise.all((page?.data ?? []).map(({ id }) => read(endpointHealthPath(id))));
  };
  await Promise.all([read(VIEW_ROUTES.overview), endpoints(), read(VIEW_ROUTES.deliveries)]);
}

/** The health route of endpoint `id`. */
export function endpointHealthPath(id: number): string {
  return VIEW_ROUTES.endpointHealth.replace('{id}', String(id));
}

function get(dashboard: Dashboard, path: string): Promise<Response> {
  return fetch(`${dashboard.apiUrl}${path}`, {
    headers: { authorization: `Bearer ${dashboard.key}`, accept: 'application/json' },
    signal: AbortSignal.timeout(30_000),
  });
}
