import { readFileSync } from 'node:fs';
import path from 'node:path';

// npm's own range semantics; semver comes with the toolchain (jest and sequelize-cli depend on it).
const semver = require('semver') as { satisfies(version: string, range: string): boolean; minVersion(range: string): { version: string } };

interface LockEntry {
  engines?: { node?: string } | string[];
}

const lock = JSON.parse(readFileSync(path.join(__dirname, '..', '..', 'package-lock.json'), 'utf8')) as { packages: Record<string, LockEntry> };

/** The lockfile's packages whose `engines.node` refuses `version`: npm ci warns EBADENGINE for each. */
function refusing(version: string): string[] {
  return Object.entries(lock.packages)
    .filter(([, entry]) => !Array.isArray(entry.engines) && typeof entry.engines?.node === 'string')
    .filter(([, entry]) => !semver.satisfies(version, (entry.engines as { node: string }).node))
    .map(([name, entry]) => `${name} (node ${(entry.engines as { node: string }).node})`);
}

// The oldest Node the package's own `engines` admits must install cleanly too.
const oldestSupported = semver.minVersion((lock.packages[''] as { engines: { node: string } }).engines.node).version;

describe('package-lock.json installs without EBADENGINE', () => {
  it.each([process.version, oldestSupported, '22.0.0'])('when npm ci runs on Node %s, then no package asks for another Node', (version) => {
    expect(refusing(version)).toEqual([]);
  });
});
