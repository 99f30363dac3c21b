import { readFileSync } from 'node:fs';
import path from 'node:path';

const semver = require('semver') as { satisfies(version: string, range: string): boolean; minVersion(range: string): { major: number } };

const root = path.join(__dirname, '..', '..');
const read = (file: string) => readFileSync(path.join(root, file), 'utf8');
const pkg = JSON.parse(read('package.json')) as { engines: { node: string }; devDependencies: Record<string, string> };

/** The Node major of every stage of the image. */
const imageMajors = [...read('Dockerfile').matchAll(/^FROM node:(\d+)-/gm)].map((match) => Number(match[1]));
/** The Node lines CI runs the suite on, the first being the image's (.ci/run). */
const ciMajors = (/CI_NODE_VERSIONS="\$\{CI_NODE_VERSIONS:-([\d ]+)\}"/.exec(read('.ci/run'))?.[1] ?? '').split(' ').map(Number);

describe('the Node versions of the image, CI and package.json agree', () => {
  it('when the image is built, then every stage runs the Node line CI tests first', () => {
    expect(imageMajors.length).toBeGreaterThan(0);
    expect(new Set(imageMajors)).toEqual(new Set([ciMajors[0]]));
  });

  it('when CI tests a Node line, then engines admits it, and the oldest line engines admits is tested', () => {
    for (const major of ciMajors) expect(semver.satisfies(`${major}.999.0`, pkg.engines.node)).toBe(true);
    expect(ciMajors).toContain(semver.minVersion(pkg.engines.node).major);
  });

  it("when code is type-checked, then it sees the API of the oldest Node line it must run on", () => {
    expect(semver.minVersion(pkg.devDependencies['@types/node']).major).toBe(semver.minVersion(pkg.engines.node).major);
  });
});
