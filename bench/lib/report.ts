import { median } from './timing';

/** One measured figure, beside its baseline when it has one. */
export interface Figure {
  name: string;
  /** Unit of `ours` and `baseline`, e.g. `ops/s`, `req/s`, `ms`. */
  unit: string;
  ours: number;
  /** What ours is compared with, measured in the same run. */
  baseline?: { name: string; value: number };
  /** An upper bound to read ours against, e.g. bare node:crypto for signing (no goal). */
  limit?: { name: string; value: number };
  /** The minimum `ours / baseline` the issue asks for; absent when there is no goal. */
  goal?: number;
  /** An absolute goal instead: ours must stay below this, in `unit` (e.g. p99 < 100 ms, RSS < 150 MB). */
  below?: number;
  /** Why the measurement of ours is not valid (e.g. most requests failed); the goal then counts as not met. */
  problem?: string;
  /**
   * The ratio of ours to the baseline in each round, when the two took turns (lib/turns.ts):
   * the figure's ratio is then their median, shown with their min and max; `ours` and the
   * baseline's value are the medians of their runs.
   */
  ratios?: number[];
  /** Further measurements of ours, e.g. latency percentiles and RSS. */
  oursDetail?: string;
  baselineDetail?: string;
}

/** The figures of one benchmark, and what a reader must know to interpret them. */
export interface Section {
  title: string;
  figures: Figure[];
  notes: string[];
}

/** The median of the round ratios when there are any, else `ours / baseline`; undefined when there is no baseline. */
export function ratio(figure: Figure): number | undefined {
  if (figure.ratios && figure.ratios.length > 0) return median(figure.ratios);
  return figure.baseline && figure.baseline.value > 0 ? figure.ours / figure.baseline.value : undefined;
}

/** A figure's ratio as printed: `0.94x`, or with round ratios `0.94x (0.88-1.02, 5 rounds)`. */
export function formatRatio(figure: Figure): string {
  const r = ratio(figure);
  if (r === undefined) return '-';
  if (!figure.ratios || figure.ratios.length < 2) return `${r.toFixed(2)}x`;
  return `${r.toFixed(2)}x (${Math.min(...figure.ratios).toFixed(2)}-${Math.max(...figure.ratios).toFixed(2)}, ${figure.ratios.length} rounds)`;
}

/** Whether a figure meets its goal: undefined when it has none. */
export function goalMet(figure: Figure): boolean | undefined {
  if (figure.below !== undefined) return figure.problem === undefined && figure.ours < figure.below;
  const r = ratio(figure);
  if (figure.goal === undefined || r === undefined) return undefined;
  return figure.problem === undefined && r >= figure.goal;
}

/**
 * A section as a Markdown table (readable in a terminal and pasted as is into RESULTS.md):
 * figure, ours, baseline, ratio, goal and whether it is met, and the limit when there is one.
 */
export function formatSection(section: Section): string {
  const lines = [
    `### ${section.title}`,
    '',
    '| figure | ours | baseline | ratio | goal | limit (ours / limit) |',
    '|---|---|---|---|---|---|',
  ];
  for (const figure of section.figures) {
    const met = goalMet(figure);
    const ours = `${formatNumber(figure.ours)} ${figure.unit}${figure.oursDetail ? ` (${figure.oursDetail})` : ''}`;
    const baseline = figure.baseline
      ? `${figure.baseline.name}: ${formatNumber(figure.baseline.value)} ${figure.unit}${figure.baselineDetail ? ` (${figure.baselineDetail})` : ''}`
      : '-';
    const verdict = figure.problem ? `INVALID: ${figure.problem}` : met ? 'MET' : 'NOT MET';
    const goal =
      figure.below !== undefined
        ? `< ${formatNumber(figure.below)} ${figure.unit} ${verdict}`
        : figure.goal === undefined
          ? figure.problem
            ? `INVALID: ${figure.problem}`
            : '-'
          : `>= ${figure.goal}x ${verdict}`;
    const limit = figure.limit
      ? `${figure.limit.name}: ${formatNumber(figure.limit.value)} (${(figure.ours / figure.limit.value).toFixed(2)}x)`
      : '-';
    lines.push(`| ${figure.name} | ${ours} | ${baseline} | ${formatRatio(figure)} | ${goal} | ${limit} |`);
  }
  if (section.notes.length > 0) lines.push('', ...section.notes.map((note) => `- ${note}`));
  return lines.join('\n') + '\n';
}

/** Three significant figures, with thousands separators for large values. */
export function formatNumber(value: number): string {
  if (!Number.isFinite(value)) return String(value);
  if (Math.abs(value) >= 1000) return Math.round(value).toLocaleString('en-US');
  return Number(value.toPrecision(3)).toString();
}
