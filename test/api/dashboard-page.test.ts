import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { dashboardDirectory } from '../../services/api/src/plugins/dashboard';
import { ROOT } from '../support/processes';
import { ApiHarness, createApiHarness } from './support/api-harness';

describe('the dashboard page', () => {
  let harness: ApiHarness;

  beforeAll(async () => {
    harness = await createApiHarness();
  });

  afterAll(() => harness.close());

  it.each(['a', 'b'] as const)(
    'when /dashboard is fetched from Layout %s, then it is the HTML page under a strict Content-Security-Policy',
    async (layout) => {
      const api = await harness.start(layout);
      const res = await api.request({ url: '/dashboard' });
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
      const csp = res.headers['content-security-policy'];
      expect(csp).toContain("default-src 'none'");
      expect(csp).toContain("script-src 'self'");
      expect(csp).not.toContain('unsafe-inline');
      expect(csp).not.toContain('unsafe-eval');
      expect(res.headers['x-frame-options']).toBe('DENY');
      expect(res.headers['x-content-type-options']).toBe('nosniff');
      expect(res.headers['set-cookie']).toBeUndefined();
      expect(res.body).toContain('<script type="module" src="/dashboard/assets/dashboard.js"></script>');
    },
  );

  it('when the page is read, then every script is a file of its own: nothing inline, no other origin', () => {
    const page = readFileSync(path.join(dashboardDirectory(), 'index.html'), 'utf8');
    const scripts = [...page.matchAll(/<script\b[^>]*>([\s\S]*?)<\/script>/g)];
    expect(scripts.length).toBeGreaterThan(0);
    for (const [tag, body] of scripts) {
      expect(body.trim()).toBe('');
      expect(tag).toMatch(/src="\/dashboard\/assets\/[a-z-]+\.js"/);
    }
    expect(page).not.toMatch(/\son[a-z]+=/i);
    expect(page).not.toMatch(/(src|href)="(https?:)?\/\//);
    expect(page).not.toMatch(/<style\b|style="/);
  });

  it('when the scripts are read, then none of them parses HTML (API answers are attacker-influenced)', () => {
    const assets = path.join(dashboardDirectory(), 'assets');
    for (const file of readdirSync(assets).filter((name) => name.endsWith('.js'))) {
      const source = readFileSync(path.join(assets, file), 'utf8');
      expect({ file, unsafe: source.match(/innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function/g) }).toEqual({ file, unsafe: null });
    }
  });

  it('when an asset is fetched, then it is served with its type and the same policy; an unknown one is 404', async () => {
    const api = await harness.start('a');
    const files = readdirSync(path.join(dashboardDirectory(), 'assets'));
    expect(files).toEqual(expect.arrayContaining(['dashboard.js', 'dashboard.css']));
    for (const file of files) {
      const type = { js: 'javascript', css: 'text/css', svg: 'image/svg+xml' }[path.extname(file).slice(1)] ?? 'unexpected file';
      const res = await api.request({ url: `/dashboard/assets/${file}` });
      expect({ file, status: res.statusCode }).toEqual({ file, status: 200 });
      expect(res.headers['content-type']).toContain(type);
      expect(res.headers['content-security-policy']).toContain("default-src 'none'");
    }
    expect((await api.request({ url: '/dashboard/assets/missing.js' })).statusCode).toBe(404);
    const traversal = await api.request({ url: '/dashboard/assets/..%2f..%2fsrc%2fapp.ts' });
    expect([403, 404]).toContain(traversal.statusCode);
    expect(traversal.body).not.toContain('buildApp');
  });

  it('when the charting library is fetched, then its module and stylesheet come from the installed package under the same policy, nothing else of it', async () => {
    const api = await harness.start('b');
    for (const [file, type] of [
      ['uPlot.esm.js', 'javascript'],
      ['uPlot.min.css', 'text/css'],
    ]) {
      const res = await api.request({ url: `/dashboard/vendor/uplot/${file}` });
      expect({ file, status: res.statusCode }).toEqual({ file, status: 200 });
      expect(res.headers['content-type']).toContain(type);
      expect(res.headers['content-security-policy']).toContain("style-src 'self'");
      expect(res.body).toBe(readFileSync(path.join(ROOT, 'node_modules', 'uplot', 'dist', file), 'utf8'));
    }
    for (const other of ['uPlot.cjs.js', 'uPlot.d.ts', '..%2fpackage.json', '']) {
      expect({ other, status: (await api.request({ url: `/dashboard/vendor/uplot/${other}` })).statusCode }).toEqual({ other, status: 404 });
    }
  });

  it('when the dashboard folder is looked up from the built tree, then it is the one in the sources', () => {
    expect(dashboardDirectory(path.join(ROOT, 'dist', 'services', 'api', 'src', 'plugins'))).toBe(
      path.join(ROOT, 'services', 'api', 'dashboard'),
    );
  });
});
