import { Document, Spectral } from '@stoplight/spectral-core';
import { Json } from '@stoplight/spectral-parsers';
import { oas } from '@stoplight/spectral-rulesets';
import { ApiHarness, createApiHarness } from './support/api-harness';

/**
 * The OpenAPI documents as other people's tools read them: Spectral's `spectral:oas` ruleset
 * (the one `spectral lint` applies by default), whose warnings are what SDK generators and
 * API catalogues trip over (operations without an operationId get no method name).
 */
describe('OpenAPI documents under Spectral', () => {
  let harness: ApiHarness;

  beforeAll(async () => {
    harness = await createApiHarness();
  });

  afterAll(() => harness.close());

  it.each(['a', 'b'] as const)('when Layout %s serves /docs/json, then the oas ruleset finds no error and no warning', async (layout) => {
    const api = await harness.start(layout);
    const spectral = new Spectral();
    spectral.setRuleset({ extends: [oas] } as never);

    const results = await spectral.run(new Document((await api.request({ url: '/docs/json' })).body, Json, `openapi-${layout}.json`));

    // Spectral's severities: 0 error, 1 warning, 2 information, 3 hint.
    const problems = results.filter((result) => result.severity <= 1).map((result) => `${result.code} at ${result.path.join('.')}: ${result.message}`);
    expect(problems).toEqual([]);
  });
});
