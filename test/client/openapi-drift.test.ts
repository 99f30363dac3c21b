import { createTestEnvironment, processEnv, TestEnvironment } from '../support/environment';
import { freePort, runScript, ServiceProcess, startService } from '../support/processes';


/** The typed client cannot drift from the api: its generated files are what the running api's /docs/json gives today. */
describe('the typed client matches the api', () => {
  let env: TestEnvironment;
  const services: ServiceProcess[] = [];

  const startApi = async (layout: 'a' | 'b') => {
    const port = await freePort();
    services.push(await startService(`api-${layout}`, 'dist/services/api/src/server.js', processEnv(env, { API_LAYOUT: layout, PORT: String(port), HOST: '127.0.0.1' }), port));
    return `http://127.0.0.1:${port}`;
  };
  const documentOf = async (layout: 'a' | 'b') => (await (await fetch(`${await startApi(layout)}/docs/json`)).json()) as { paths: Record<string, unknown> };

  beforeAll(async () => {
    env = await createTestEnvironment();
  });

  afterAll(async () => {
    await Promise.all(services.map((service) => service.stop('SIGKILL')));
    await env?.cleanup();
  });

  it('when the client is regenerated from the api, then openapi.json and src/schema.ts come out unchanged', async () => {
    // A process of its own: openapi-typescript loads ES modules, which jest's module system cannot.
    const result = await runScript('clients/node/scripts/generate.js', ['--check', await startApi('a')], {});
    expect(result).toMatchObject({ code: 0, stderr: '' });
  });

  it('when the client talks to Layout B, then every route it calls is described there exactly as in Layout A', async () => {
    const [a, b] = [await documentOf('a'), await documentOf('b')];
    const clientRoutes = Object.keys(a.paths).filter((route) => !route.startsWith('/api/v1/posts') && route.startsWith('/api/v1/'));
    expect(clientRoutes.length).toBeGreaterThan(5);
    for (const route of clientRoutes) expect({ route, operations: b.paths[route] }).toEqual({ route, operations: a.paths[route] });
  });
});
