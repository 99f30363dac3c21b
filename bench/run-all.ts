import { availableParallelism, cpus, freemem, loadavg, totalmem } from 'node:os';
import { runApiBench } from './api';
import { runCapacityBench } from './capacity';
import { runDeliveryBench } from './delivery';
import { runParkedBench } from './parked';
import { runPartitionsBench } from './partitions';
import { runReplicaBench } from './replica';
import { formatNumber, formatRatio, formatSection, goalMet, Section } from './lib/report';
import { closeScopesOnSignal } from './lib/scope';
import { BenchSettings, loadBenchSettings } from './lib/settings';
import { runScalingBench } from './scaling';
import { runSigningBench } from './signing';
import { runStatsBench } from './stats';
import { runStorageBench } from './storage';
import { runVersusBench } from './versus';

const RUNNERS: Record<string, (settings: BenchSettings) => Section | Promise<Section>> = {
  signing: runSigningBench,
  api: runApiBench,
  delivery: runDeliveryBench,
  partitions: runPartitionsBench,
  scaling: runScalingBench,
  capacity: runCapacityBench,
  replica: runReplicaBench,
  parked: runParkedBench,
  storage: runStorageBench,
  stats: runStatsBench,
  versus: runVersusBench,
};

/**
 * `npm run bench`: runs every section (or those of BENCH_ONLY) one after the other, prints
 * each figure beside its baseline with the ratio and the goal, then a summary of the goals.
 * A goal not met never fails the run; a section that could not run (a service missing or
 * crashing) is reported and makes the exit code 1, after the other sections have run.
 */
async function main(): Promise<void> {
  closeScopesOnSignal();
  const settings = loadBenchSettings();
  const started = Date.now();
  process.stdout.write(machineDescription(settings));
  const sections: Section[] = [];
  const failures: string[] = [];
  for (const [name, run] of Object.entries(RUNNERS)) {
    if (!settings.only.has(name)) continue;
    const sectionStarted = Date.now();
    process.stderr.write(`bench: ${name}...\n`);
    try {
      const section = await run(settings);
      sections.push(section);
      process.stdout.write(`\n${formatSection(section)}_${name}: ${((Date.now() - sectionStarted) / 1000).toFixed(0)} s_\n`);
    } catch (error) {
      failures.push(name);
      process.stdout.write(`\n### ${name}: could not run\n\n\`\`\`\n${(error as Error).stack ?? String(error)}\n\`\`\`\n`);
    }
  }
  process.stdout.write(`\n${summary(sections, failures)}\nTotal: ${((Date.now() - started) / 1000).toFixed(0)} s\n`);
  if (failures.length > 0) process.exitCode = 1;
}

function machineDescription(settings: BenchSettings): string {
  const cpu = cpus()[0]?.model ?? 'unknown CPU';
  const gib = (bytes: number) => (bytes / 2 ** 30).toFixed(1);
  return [
    `## Benchmark run ${new Date().toISOString()}${settings.quick ? ' (BENCH_QUICK smoke run)' : ''}`,
    '',
    `- machine: ${availableParallelism()} CPUs (${cpu}), ${gib(totalmem())} GiB memory, ${gib(freemem())} GiB free`,
    `- node ${process.version}; load average at start ${loadavg().map((l) => l.toFixed(2)).join(' ')}`,
    `- sizes: ${settings.events} webhooks per delivery run; scaling ${settings.scalingEvents} at concurrency ${settings.workerConcurrency} and ${settings.scalingLowEvents} at ${settings.scalingLowConcurrency}; latency curve at ${settings.latencyRates.join(', ')} posts/s for ${settings.latencyDurationS} s each; ${settings.rounds} rounds; API ${settings.apiDurationS} s per contender and round after ${settings.apiWarmupS} s warm-up, ${settings.apiPosts} posts`,
    '',
  ].join('\n');
}

function summary(sections: Section[], failures: string[]): string {
  const lines = ['### Goals', ''];
  for (const section of sections) {
    for (const figure of section.figures) {
      const met = goalMet(figure);
      if (met === undefined) continue;
      const verdict = figure.problem ? `NOT MET (invalid: ${figure.problem})` : met ? 'MET' : 'NOT MET';
      const measured =
        figure.below !== undefined
          ? `${formatNumber(figure.ours)} ${figure.unit} (goal < ${formatNumber(figure.below)} ${figure.unit})`
          : `${formatRatio(figure)} ${figure.baseline!.name} (goal ${figure.goal}x)`;
      lines.push(`- ${verdict}: ${figure.name}: ${measured}`);
    }
  }
  for (const name of failures) lines.push(`- NOT RUN: ${name} (see its error above)`);
  return lines.join('\n') + '\n';
}

void main();
