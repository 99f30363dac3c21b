import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * Summarises V8 CPU profiles (`.cpuprofile`, written by `node --cpu-prof`; the bench writes
 * them when BENCH_CPU_PROF names a folder): for each profile, the busy share of the process,
 * where self time went by area (our files, each npm package, node internals, GC), the top
 * functions by self time, and our functions by inclusive time.
 *
 * Usage: `node dist/bench/profile-summary.js <folder-or-file>...`
 */

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const TOP = 20;

function summarise(file: string): string {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const selfUs = new Map<number, number>();
  profile.samples.forEach((id, i) => selfUs.set(id, (selfUs.get(id) ?? 0) + Math.max(0, profile.timeDeltas[i] ?? 0)));
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);

  const totalUs = [...selfUs.values()].reduce((a, b) => a + b, 0);
  const idleUs = sumWhere(profile.nodes, selfUs, (node) => node.callFrame.functionName === '(idle)');
  const bySelf = new Map<string, number>();
  const byArea = new Map<string, number>();
  const inclusive = new Map<string, number>();
  for (const node of profile.nodes) {
    const self = selfUs.get(node.id) ?? 0;
    if (self === 0 || node.callFrame.functionName === '(idle)') continue;
    add(bySelf, label(node.callFrame), self);
    add(byArea, area(node.callFrame.url, node.callFrame.functionName), self);
    // Charge the sample to each distinct function of ours on its stack, once.
    const seen = new Set<string>();
    for (let id: number | undefined = node.id; id !== undefined; id = parent.get(id)) {
      const frame = byId.get(id)!.callFrame;
      if (!isOurs(frame.url)) continue;
      const key = label(frame);
      if (!seen.has(key)) add(inclusive, key, self);
      seen.add(key);
    }
  }
  const busyUs = totalUs - idleUs;
  const pct = (us: number) => `${((100 * us) / busyUs).toFixed(1).padStart(5)}%`;
  const table = (title: string, map: Map<string, number>) =>
    [`  ${title}`, ...[...map.entries()].sort((a, b) => b[1] - a[1]).slice(0, TOP).map(([name, us]) => `    ${pct(us)}  ${name}`)].join('\n');
  return [
    `${path.basename(file)}: ${(totalUs / 1e6).toFixed(1)} s profiled, busy ${(busyUs / 1e6).toFixed(1)} s (${((100 * busyUs) / totalUs).toFixed(0)}%); shares are of busy time`,
    table('self time by area', byArea),
    table('self time by function', bySelf),
    table('inclusive time of our functions', inclusive),
  ].join('\n');
}

function add(map: Map<string, number>, key: string, us: number): void {
  map.set(key, (map.get(key) ?? 0) + us);
}

function sumWhere(nodes: ProfileNode[], selfUs: Map<number, number>, match: (node: ProfileNode) => boolean): number {
  return nodes.filter(match).reduce((sum, node) => sum + (selfUs.get(node.id) ?? 0), 0);
}

function isOurs(url: string): boolean {
  return url.includes('/dist/') && !url.includes('/node_modules/');
}

/** A file's location from the project root (`services/...`, `bench/...`) or from node_modules. */
function shortUrl(url: string): string {
  const modules = url.lastIndexOf('/node_modules/');
  if (modules >= 0) return url.slice(modules + '/node_modules/'.length);
  const dist = url.lastIndexOf('/dist/');
  if (dist >= 0) return url.slice(dist + '/dist/'.length);
  return url;
}

function label(frame: CallFrame): string {
  const where = frame.url ? ` ${shortUrl(frame.url)}:${frame.lineNumber + 1}` : '';
  return `${frame.functionName || '(anonymous)'}${where}`;
}

function area(url: string, functionName: string): string {
  if (!url) return functionName.startsWith('(') ? functionName : '(native)';
  if (url.startsWith('node:')) return 'node internals';
  const modules = url.lastIndexOf('/node_modules/');
  if (modules >= 0) {
    const rest = url.slice(modules + '/node_modules/'.length).split('/');
    return `npm ${rest[0].startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]}`;
  }
  return isOurs(url) ? `ours ${path.dirname(shortUrl(url))}` : url;
}

function profilesIn(target: string): string[] {
  if (target.endsWith('.cpuprofile')) return [target];
  return readdirSync(target)
    .filter((name) => name.endsWith('.cpuprofile'))
    .sort()
    .map((name) => path.join(target, name));
}

if (require.main === module) {
  const targets = process.argv.slice(2);
  if (targets.length === 0) {
    process.stderr.write('usage: node dist/bench/profile-summary.js <folder-or-.cpuprofile>...\n');
    process.exitCode = 2;
  }
  for (const file of targets.flatMap(profilesIn)) process.stdout.write(`${summarise(file)}\n\n`);
}
