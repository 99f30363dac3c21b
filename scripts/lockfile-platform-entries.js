#!/usr/bin/env node
// Some registry mirrors serve only a few platforms' builds of packages such as @swc/core or
// msgpackr-extract. `npm install` then leaves the other platforms' optional packages out of
// package-lock.json, and `npm ci` refuses that lockfile as out of sync. This adds each
// missing optional platform package with the os/cpu/libc its name states, so `npm ci` skips
// it on other platforms and installs it, from the registry, on its own.
// Run after `npm install` changes the lockfile: node scripts/lockfile-platform-entries.js
const fs = require('node:fs');
const path = require('node:path');

const PLATFORM = /-(darwin|linux|win32|android|freebsd|openbsd|netbsd|sunos|aix|openharmony)-(x64|arm64|arm|ia32|ppc64|s390x|riscv64|loong64|mips64el)(?:-(gnu|musl|gnueabihf|musleabihf|msvc|eabi))?$/;

const file = path.join(__dirname, '..', 'package-lock.json');
const lock = JSON.parse(fs.readFileSync(file, 'utf8'));
const added = [];

for (const [location, entry] of Object.entries(lock.packages)) {
  for (const [name, version] of Object.entries(entry.optionalDependencies ?? {})) {
    const match = PLATFORM.exec(name);
    if (!match || isResolved(location, name)) continue;
    const [, os, cpu, abi] = match;
    const stub = { version, cpu: [cpu], os: [os], optional: true };
    if (abi?.startsWith('gnu')) stub.libc = ['glibc'];
    if (abi?.startsWith('musl')) stub.libc = ['musl'];
    lock.packages[`node_modules/${name}`] = stub;
    added.push(`${name}@${version}`);
  }
}

/** True when npm's resolution from `location` finds `name` somewhere up the node_modules chain. */
function isResolved(location, name) {
  for (let dir = location; ; dir = dir.replace(/\/?node_modules\/(@[^/]+\/)?[^/]+$/, '')) {
    if (lock.packages[`${dir ? `${dir}/` : ''}node_modules/${name}`]) return true;
    if (!dir) return false;
  }
}

fs.writeFileSync(file, `${JSON.stringify(lock, null, 2)}\n`);
console.log(added.length ? `added ${added.length} platform entries:\n${added.join('\n')}` : 'lockfile complete');
