import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ROOT } from '../support/processes';

// Plain JS, loaded as it runs: `npm run users` and the others go through it.
const { needsBuild, copyAssets, pruneStale, STAMP } = require('../../scripts/run-built.js') as {
  needsBuild(root: string): boolean;
  copyAssets(root: string): void;
  pruneStale(root: string): void;
  STAMP: string;
};

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function cli(name: string, args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    // A database that is never reached: help and usage errors must not need one.
    const env = { ...process.env, DATABASE_URL: 'postgres://postgres@127.0.0.1:9/none', NODE_ENV: 'test' };
    execFile(process.execPath, [path.join(ROOT, 'dist', 'scripts', `${name}-cli.js`), ...args], { env }, (error, stdout, stderr) => {
      resolve({ code: error ? Number(error.code) : 0, stdout, stderr });
    });
  });
}

const CLIS = ['users', 'keys', 'endpoints', 'webhook'];

describe('the CLIs (npm run users | keys | endpoints | webhook)', () => {
  it.each(CLIS)('when %s is asked for --help, then it prints its usage on stdout and exits 0', async (name) => {
    const result = await cli(name, ['--help']);
    expect({ code: result.code, stderr: result.stderr }).toEqual({ code: 0, stderr: '' });
    expect(result.stdout).toMatch(new RegExp(`^usage:(\\n| )\\s*npm run ${name} -- `));
  });

  it.each(CLIS)('when %s gets an unknown command, then it says so in one error line followed by the usage, exit code 2', async (name) => {
    const result = await cli(name, ['frobnicate']);
    expect({ code: result.code, stdout: result.stdout }).toEqual({ code: 2, stdout: '' });
    expect(result.stderr).toMatch(/^error: [Uu]nknown command "frobnicate"\.?\nusage:/);
  });
});

describe('scripts/run-built.js: a CLI call builds only when a source changed', () => {
  let root: string;
  const at = (file: string, seconds: number) => utimesSync(path.join(root, file), seconds, seconds);

  beforeEach(() => {
    root = mkdtempSync(path.join(tmpdir(), 'run-built-'));
    for (const dir of ['shared/db', 'services', 'scripts', 'bench', 'dist']) mkdirSync(path.join(root, dir), { recursive: true });
    for (const file of ['shared/db/index.ts', 'tsconfig.json', 'package.json', STAMP]) writeFileSync(path.join(root, file), '');
    at('shared/db/index.ts', 1_000);
    at('tsconfig.json', 1_000);
    at('package.json', 1_000);
  });

  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('when nothing changed since the last build, then it does not build', () => {
    at(STAMP, 2_000);
    expect(needsBuild(root)).toBe(false);
  });

  it('when a source file or the package file changed after the last build, then it builds', () => {
    at(STAMP, 2_000);
    at('shared/db/index.ts', 3_000);
    expect(needsBuild(root)).toBe(true);
    at('shared/db/index.ts', 1_000);
    at('package.json', 3_000);
    expect(needsBuild(root)).toBe(true);
  });

  it('when there was never a build, then it builds', () => {
    rmSync(path.join(root, STAMP));
    expect(needsBuild(root)).toBe(true);
  });

  it('when a Lua script changed after the last build, then it builds, and the build copies it beside the compiled code', () => {
    mkdirSync(path.join(root, 'shared/gate/lua/includes'), { recursive: true });
    writeFileSync(path.join(root, 'shared/gate/lua/includes/now.lua'), 'return 1\n');
    at('shared/gate/lua/includes/now.lua', 3_000);
    at(STAMP, 2_000);

    expect(needsBuild(root)).toBe(true);
    copyAssets(root);
    expect(readFileSync(path.join(root, 'dist/shared/gate/lua/includes/now.lua'), 'utf8')).toBe('return 1\n');
  });

  it('when a source was moved or deleted since the last build, then its outputs leave dist/, so its old copy never shadows the new module', () => {
    // shared/db/index.ts stays; shared/operations/endpoints.ts became the folder endpoints/.
    mkdirSync(path.join(root, 'dist/shared/db'), { recursive: true });
    mkdirSync(path.join(root, 'dist/shared/operations/endpoints'), { recursive: true });
    mkdirSync(path.join(root, 'dist/shared/gate/lua'), { recursive: true });
    const kept = ['dist/shared/db/index.js', 'dist/shared/db/index.js.map', 'dist/shared/config/dev-defaults.json'];
    const stale = ['dist/shared/operations/endpoints.js', 'dist/shared/operations/endpoints.js.map', 'dist/shared/operations/endpoints.d.ts', 'dist/shared/gate/lua/gone.lua'];
    mkdirSync(path.join(root, 'dist/shared/config'), { recursive: true });
    for (const file of [...kept, ...stale]) writeFileSync(path.join(root, file), '');

    pruneStale(root);

    expect(kept.filter((file) => !existsSync(path.join(root, file)))).toEqual([]);
    expect(stale.filter((file) => existsSync(path.join(root, file)))).toEqual([]);
  });

  it('when there are no TypeScript sources (the container image), then it never builds', () => {
    rmSync(path.join(root, 'shared/db/index.ts'));
    rmSync(path.join(root, STAMP));
    expect(needsBuild(root)).toBe(false);
  });
});
