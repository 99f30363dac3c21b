import { readFileSync } from 'node:fs';
import path from 'node:path';
import { dashboardDirectory } from '../../services/api/src/plugins/dashboard';
import { ApiHarness, createApiHarness } from './support/api-harness';

/**
 * docs/design.md §11.6: `/portal` is the dashboard's page in portal mode, and the only page
 * other origins may frame (PORTAL_FRAME_ANCESTORS); `/dashboard`, where keys are typed, never is.
 */
describe('the portal page', () => {
  let harness: ApiHarness;

  beforeAll(async () => {
    harness = await createApiHarness();
  });

  afterAll(() => harness.close());

  it.each(['a', 'b'] as const)('when /portal is fetched from Layout %s, then it is the dashboard page framable by the configured origins only', async (layout) => {
    const api = await harness.start(layout, { portalFrameAncestors: ['https://app.example.com', 'https://*.example.org'] });
    const res = await api.request({ url: '/portal' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(res.body).toBe(readFileSync(path.join(dashboardDirectory(), 'index.html'), 'utf8'));
    const directives = res.headers['content-security-policy'].split('; ');
    expect(directives).toContain("frame-ancestors 'self' https://app.example.com https://*.example.org");
    expect(directives).toEqual(expect.arrayContaining(["default-src 'none'", "script-src 'self'", "connect-src 'self'", "form-action 'none'"]));
    expect(res.headers['x-frame-options']).toBeUndefined();
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['referrer-policy']).toBe('no-referrer');
    expect(res.headers['set-cookie']).toBeUndefined();

    const dashboard = await api.request({ url: '/dashboard' });
    expect(dashboard.headers['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(dashboard.headers['x-frame-options']).toBe('DENY');
  });

  it('when PORTAL_FRAME_ANCESTORS is empty, then only the api\'s own origin may frame the portal', async () => {
    const api = await harness.start('a');
    const res = await api.request({ url: '/portal' });
    expect(res.headers['content-security-policy'].split('; ')).toContain("frame-ancestors 'self'");
    expect(res.headers['x-frame-options']).toBeUndefined();
  });
});
