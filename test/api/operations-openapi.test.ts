import { ApiHarness, createApiHarness } from './support/api-harness';

// Every route of the operations API (docs/design.md §6.2, §11.1), as OpenAPI names them.
const OPERATIONS: Array<[string, string, number]> = [
  ['post', '/api/v1/endpoints', 201],
  ['get', '/api/v1/endpoints', 200],
  ['get', '/api/v1/endpoints/{id}', 200],
  ['patch', '/api/v1/endpoints/{id}', 200],
  ['delete', '/api/v1/endpoints/{id}', 204],
  ['post', '/api/v1/endpoints/{id}/rotate-secret', 200],
  ['post', '/api/v1/endpoints/{id}/test', 202],
  ['post', '/api/v1/endpoints/{id}/recover', 202],
  ['get', '/api/v1/endpoints/{id}/stats', 200],
  ['get', '/api/v1/stats', 200],
  ['post', '/api/v1/events', 202],
  ['get', '/api/v1/event-types', 200],
  ['post', '/api/v1/event-types', 201],
  ['post', '/api/v1/webhooks', 202],
  ['get', '/api/v1/webhooks', 200],
  ['get', '/api/v1/webhooks/{id}', 200],
  ['post', '/api/v1/webhooks/{id}/redeliver', 202],
];
const WITH_BODY = new Set(['post /api/v1/endpoints', 'patch /api/v1/endpoints/{id}', 'post /api/v1/endpoints/{id}/recover', 'post /api/v1/events', 'post /api/v1/event-types', 'post /api/v1/webhooks']);

describe('OpenAPI document of the operations API', () => {
  let harness: ApiHarness;

  beforeAll(async () => {
    harness = await createApiHarness();
  });

  afterAll(() => harness.close());

  it.each(['a', 'b'] as const)('when /docs/json is fetched from Layout %s, then every operations route has its schemas, bearer security and 4xx answers', async (layout) => {
    const api = await harness.start(layout);
    const document = (await api.request({ url: '/docs/json' })).json();

    expect(document.components.securitySchemes.bearerToken).toMatchObject({ type: 'http', scheme: 'bearer' });
    for (const [method, path, success] of OPERATIONS) {
      const operation = document.paths[path]?.[method];
      expect({ route: `${method} ${path}`, found: Boolean(operation) }).toEqual({ route: `${method} ${path}`, found: true });
      expect(operation.security).toEqual(expect.arrayContaining([{ bearerToken: [] }]));
      expect(Object.keys(operation.responses)).toEqual(expect.arrayContaining([String(success), '400', '401']));
      if (success !== 204) expect(operation.responses[success].content['application/json'].schema).toBeDefined();
      if (WITH_BODY.has(`${method} ${path}`)) expect(operation.requestBody.content['application/json'].schema.properties).toBeDefined();
    }
    expect(Object.keys(document.paths['/api/v1/endpoints/{id}'].get.responses)).toContain('404');
    expect(Object.keys(document.paths['/api/v1/webhooks'].post.responses)).toContain('403');
    expect(document.paths['/api/v1/webhooks'].get.parameters.map((parameter: { name: string }) => parameter.name)).toEqual(
      expect.arrayContaining(['status', 'event', 'endpoint_id', 'since', 'until', 'limit', 'cursor']),
    );
    expect(document.paths['/api/v1/webhooks/{id}'].get.responses['200'].content['application/json'].schema.properties.attempts).toBeDefined();
    for (const path of ['/api/v1/endpoints/{id}/stats', '/api/v1/stats']) {
      expect(document.paths[path].get.parameters).toEqual(expect.arrayContaining([expect.objectContaining({ name: 'series', in: 'query', schema: expect.objectContaining({ enum: ['1h', '24h'] }) })]));
      const series = document.paths[path].get.responses['200'].content['application/json'].schema.properties.series;
      expect(series.items.required).toEqual(['start', 'succeeded', 'failed', 'retried', 'p50_ms', 'p95_ms']);
    }
  });
});
