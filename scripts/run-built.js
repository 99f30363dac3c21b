#!/usr/bin/env node
// Runs a compiled entry point of dist/, building first only when a source changed since
// the last build, so `npm run users -- ...` answers at once when nothing changed.
// Plain JS: it runs before any build.
const { spawnSync } = require('node:child_process');
const { copyFileSync, existsSync, mkdirSync, readdirSync, statSync, unlinkSync, utimesSync, writeFileSync } = require('node:fs');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..');
/** What tsconfig.build.json compiles, and the files that change how it compiles. */
const SOURCE_DIRS = ['shared', 'services', 'scripts', 'bench'];
const SOURCE_FILES = ['tsconfig.json', 'tsconfig.build.json', 'package.json', 'package-lock.json'];
/** Files tsc does not emit that the built code reads beside itself (the endpoint gate's Lua scripts): copied into dist/. */
const ASSETS = /\.lua$/;
/** Written after each successful build; its mtime is the build's time. */
const STAMP = path.join('dist', '.build-stamp');

/** The newest modification time (ms) of a file under `dir` whose name matches `pattern`, or 0. */
function newestIn(dir, pattern) {
  let newest = 0;
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return 0;
  }
  for (const entry of entries) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestIn(full, pattern));
    else if (pattern.test(entry.name)) newest = Math.max(newest, statSync(full).mtimeMs);
  }
  return newest;
}

function mtime(file) {
  try {
    return statSync(file).mtimeMs;
  } catch {
    return 0;
  }
}

/** Every file under `dir` whose name matches `pattern`, as paths relative to `root`. */
function filesIn(root, dir, pattern) {
  let entries;
  try {
    entries = readdirSync(path.join(root, dir), { withFileTypes: true });
  } catch {
    return [];
  }
  return entries.flatMap((entry) => {
    const relative = path.join(dir, entry.name);
    if (entry.isDirectory()) return filesIn(root, relative, pattern);
    return pattern.test(entry.name) ? [relative] : [];
  });
}

/**
 * Whether the build under `root` is out of date: no stamp yet, or a source (.ts/.json/.lua under
 * shared, services, scripts, bench, or a tsconfig/package file) modified after the stamp.
 * Never where there are no sources to build from (a container image).
 *
 * @param {string} root - the project root
 * @returns {boolean}
 */
function needsBuild(root) {
  // No TypeScript sources (the container image ships dist/ only): nothing to build from.
  if (Math.max(...SOURCE_DIRS.map((dir) => newestIn(path.join(root, dir), /\.ts$/))) === 0) return false;
  const newestSource = Math.max(...SOURCE_DIRS.map((dir) => newestIn(path.join(root, dir), /\.(ts|json|lua)$/)));
  const built = mtime(path.join(root, STAMP));
  if (built === 0) return true;
  return Math.max(newestSource, ...SOURCE_FILES.map((file) => mtime(path.join(root, file)))) > built;
}

/** Copies the assets (ASSETS) of the source directories to the same paths under dist/. */
function copyAssets(root) {
  for (const file of SOURCE_DIRS.flatMap((dir) => filesIn(root, dir, ASSETS))) {
    mkdirSync(path.join(root, 'dist', path.dirname(file)), { recursive: true });
    copyFileSync(path.join(root, file), path.join(root, 'dist', file));
  }
}

/** What tsc emits for a source (`x.js`, `x.js.map`, `x.d.ts`), and the assets copied beside them. */
const OUTPUT = /(\.js|\.js\.map|\.d\.ts|\.lua)$/;

/**
 * Deletes the outputs under dist/ whose source is gone (a file moved or deleted since an earlier
 * build): tsc never removes them, and a stale `x.js` beside a new folder `x/` wins Node's
 * resolution of `require('./x')`, so the build would run code that no longer exists.
 */
function pruneStale(root) {
  for (const file of SOURCE_DIRS.flatMap((dir) => filesIn(path.join(root, 'dist'), dir, OUTPUT))) {
    const source = file.endsWith('.lua') ? file : file.replace(OUTPUT, '.ts');
    if (!existsSync(path.join(root, source))) unlinkSync(path.join(root, 'dist', file));
  }
}

/** Compiles with tsc (incremental), drops outputs of deleted sources, copies the assets and stamps the build; exits 1 when tsc fails. */
function build(root) {
  const tsc = require.resolve('typescript/bin/tsc', { paths: [root] });
  const started = Date.now();
  const result = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' });
  if (result.status !== 0) process.exit(1);
  pruneStale(root);
  copyAssets(root);
  mkdirSync(path.join(root, 'dist'), { recursive: true });
  // The time the build started: a file saved while tsc ran counts as newer next time.
  writeFileSync(path.join(root, STAMP), '');
  utimesSync(path.join(root, STAMP), new Date(started), new Date(started));
}

const USAGE = `usage: node scripts/run-built.js dist/<entry>.js [arguments]   build if a source changed, then run
       node scripts/run-built.js --build                          build now (npm run build)`;

function main() {
  const [entry, ...args] = process.argv.slice(2);
  if (entry === '--build') return build(ROOT);
  if (!entry || entry === '--help') {
    (entry ? console.log : console.error)(USAGE);
    process.exit(entry ? 0 : 2);
  }
  if (needsBuild(ROOT)) build(ROOT);
  const result = spawnSync(process.execPath, [path.join(ROOT, entry), ...args], { stdio: 'inherit' });
  process.exit(result.status ?? 1);
}

if (require.main === module) main();

module.exports = { needsBuild, copyAssets, pruneStale, STAMP };
