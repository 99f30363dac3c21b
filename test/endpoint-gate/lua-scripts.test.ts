import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { ROOT } from '../support/processes';

const SOURCES = path.join(ROOT, 'shared/endpoint-gate/lua');
const BUILT = path.join(ROOT, 'dist/shared/endpoint-gate/lua');

/** Every `.lua` file under `dir`, relative to it. */
function luaFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.lua'))
    .sort();
}

describe("the endpoint gate's Lua scripts", () => {
  it('when the project is built, then dist/ holds every script and include exactly as written, where the gate loads them', () => {
    const sources = luaFiles(SOURCES);
    expect(sources).toEqual(expect.arrayContaining(['acquire.lua', 'release.lua', 'includes/reserve-rate-slot.lua']));
    expect(luaFiles(BUILT)).toEqual(sources);
    for (const file of sources) expect(readFileSync(path.join(BUILT, file), 'utf8')).toBe(readFileSync(path.join(SOURCES, file), 'utf8'));
  });

  it.each(['acquire.lua', 'release.lua', 'reserve-rate-slot.lua', 'start-attempt.lua'])('when %s is read, then its header lists its KEYS, its ARGV and its reply', (file) => {
    const header = /^--\[\[([\s\S]*?)\]\]/.exec(readFileSync(path.join(SOURCES, file), 'utf8'))?.[1] ?? '';
    expect(header).toMatch(/Input[\s\S]*KEYS\[[\s\S]*ARGV\[[\s\S]*Output/);
  });

  it('when a script includes another, then the include exists', () => {
    for (const file of luaFiles(SOURCES)) {
      for (const [, include] of readFileSync(path.join(SOURCES, file), 'utf8').matchAll(/^--- @include "([\w/-]+)"$/gm)) {
        expect(luaFiles(SOURCES)).toContain(`${include}.lua`);
      }
    }
  });
});
