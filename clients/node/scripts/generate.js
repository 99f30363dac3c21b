'use strict';

// `npm run generate -w clients/node [-- <api url>]`: reads the OpenAPI document of a running
// api (default http://127.0.0.1:3000) and writes openapi.json and src/schema.ts. With
// `--check` it writes nothing and exits 1 when either file differs from what the api gives
// (the drift check CI runs).
const { readFileSync, writeFileSync } = require('node:fs');
const path = require('node:path');
const { generatedFiles } = require('./types');

async function main() {
  const args = process.argv.slice(2);
  const check = args.includes('--check');
  const base = (args.find((arg) => !arg.startsWith('--')) ?? 'http://127.0.0.1:3000').replace(/\/$/, '');
  const response = await fetch(`${base}/docs/json`);
  if (!response.ok) throw new Error(`GET ${base}/docs/json answered ${response.status}`);
  const files = await generatedFiles(await response.json());
  const root = path.join(__dirname, '..');
  const targets = [
    ['openapi.json', files.openapi],
    [path.join('src', 'schema.ts'), files.types],
  ];
  if (check) {
    const stale = targets.filter(([file, content]) => readFileSync(path.join(root, file), 'utf8') !== content).map(([file]) => file);
    if (stale.length > 0) {
      process.stderr.write(`clients/node is out of date with the api (${stale.join(', ')}): run the api and \`npm run generate -w clients/node -- <its url>\`\n`);
      process.exitCode = 1;
    }
    return;
  }
  for (const [file, content] of targets) writeFileSync(path.join(root, file), content);
  process.stdout.write(`wrote openapi.json and src/schema.ts from ${base}/docs/json\n`);
}

main().catch((error) => {
  process.stderr.write(`error: ${error.message}\n`);
  process.exitCode = 1;
});
