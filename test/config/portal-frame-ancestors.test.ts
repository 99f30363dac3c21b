import { ConfigError, loadConfig } from '../../shared/config';

/** PORTAL_FRAME_ANCESTORS (docs/design.md §2, §11.6): the origins that may embed /portal, and nothing that could widen the policy. */
describe('PORTAL_FRAME_ANCESTORS', () => {
  it('when it is not set, then no other origin may embed the portal', () => {
    expect(loadConfig({}).portalFrameAncestors).toEqual([]);
  });

  it('when origins are given with spaces or commas, then each is kept once, lower-cased, in order', () => {
    const config = loadConfig({ PORTAL_FRAME_ANCESTORS: ' https://App.Example.com, http://127.0.0.1:8080  https://*.example.org:*,https://app.example.com ' });
    expect(config.portalFrameAncestors).toEqual(['https://app.example.com', 'http://127.0.0.1:8080', 'https://*.example.org:*']);
  });

  it.each([
    ['*', 'every site'],
    ['https:', 'a scheme alone'],
    ["'none'", 'a keyword'],
    ['https://app.example.com/path', 'a path'],
    ['https://app.example.com;script-src *', 'a second directive'],
    ['ftp://app.example.com', 'another scheme'],
    ['app.example.com', 'a host without its scheme'],
  ])('when it holds %j (%s), then start-up fails naming the variable and the entry', (value) => {
    expect(() => loadConfig({ PORTAL_FRAME_ANCESTORS: `https://ok.example.com ${value}` })).toThrow(ConfigError);
    expect(() => loadConfig({ PORTAL_FRAME_ANCESTORS: `https://ok.example.com ${value}` })).toThrow(
      /^Invalid environment variable PORTAL_FRAME_ANCESTORS: .*is not an origin/,
    );
  });
});
