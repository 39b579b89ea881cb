// What-if rendering: the answer of `POST /api/v1/clusters/{name}/what-if` as an element: a
// balance summary before → after, the moves (where each pod would land, or why no node fits) and
// per-node bars before/after with the profile's thresholds drawn.
//
// Owns: `renderWhatIf(result, {compact})` (shared with the admin views) and `whatIfBody(filter)`.
// Must not: call the API; callers fetch and pass the answer (so a preview dialog and a run page
// render the same thing).

import { h, route } from './dom.js';

const METRICS = [
  ['cpu', 'CPU'],
  ['memory', 'Memory'],
  ['pods', 'Pods'],
];
/** Nodes drawn with bars; the rest are summarised (a cluster may have thousands). */
const MAX_NODE_ROWS = 200;

function percentOf(stat, metric, basis = 'requested') {
  if (!stat) return null;
  if (metric === 'pods') return stat.pods?.capacity ? (100 * stat.pods.count) / stat.pods.capacity : null;
  const m = stat[metric];
  if (!m?.allocatable) return null;
  const value = basis === 'usage' ? m.used : m.requested;
  return value === null || value === undefined ? null : (100 * value) / m.allocatable;
}

function pct(value) {
  return value === null || value === undefined || !Number.isFinite(value) ? '—' : `${value.toFixed(1)}%`;
}

/** The body of a what-if request for a decisions filter (the list's query names). */
export function whatIfBody({ ids, filter, run, profile } = {}) {
  const body = {};
  if (ids) body.decisions = ids;
  else if (run !== undefined && run !== null) body.run = Number(run);
  else {
    const f = {};
    for (const key of ['run', 'plugin', 'namespace', 'node', 'profile', 'pod', 'status']) {
      const value = filter?.[key];
      if (value !== undefined && value !== null && value !== '') f[key] = key === 'run' ? Number(value) : value;
    }
    body.filter = f;
  }
  if (profile) body.profile = profile;
  return body;
}

/** One horizontal bar with its threshold marks; `after` draws a second bar below. */
function bar(metric, label, before, after, thresholds, mean = null) {
  const track = (value, kind) => {
    const fill = h('span', { class: `wi-fill wi-${kind}` });
    fill.style.width = `${Math.max(0, Math.min(100, value ?? 0))}%`;
    if (value !== null && value > 100) fill.classList.add('wi-over');
    return h('span', { class: 'wi-track' }, fill);
  };
  const marks = [];
  for (const t of thresholds) {
    for (const [edge, value] of [['low', t.low?.[metric]], ['high', t.high?.[metric]]]) {
      if (typeof value !== 'number') continue;
      // Deviation thresholds are relative to the mean (useDeviationThresholds).
      if (t.deviation && typeof mean !== 'number') continue;
      const at = t.deviation ? (edge === 'low' ? mean - value : mean + value) : value;
      const mark = h('span', {
        class: `wi-mark wi-mark-${edge}`,
        title: `${t.plugin} ${edge} threshold ${t.deviation ? `mean ${edge === 'low' ? '−' : '+'} ${value}% = ${at.toFixed(1)}%` : `${value}%`} (${t.basis})`,
      });
      mark.style.left = `${Math.max(0, Math.min(100, at))}%`;
      marks.push(mark);
    }
  }
  const changed = after !== undefined && before !== null && after !== null && Math.abs(after - before) >= 0.05;
  return h('div', { class: 'wi-bar', role: 'img', 'aria-label': `${label} ${pct(before)}${after !== undefined ? ` → ${pct(after)}` : ''}` },
    h('span', { class: 'wi-bar-label', text: label }),
    h('span', { class: 'wi-bars' }, track(before, 'before'), after !== undefined ? track(after, 'after') : null, marks),
    h('span', { class: `wi-bar-value${changed ? ' wi-changed' : ''}`, text: after !== undefined ? `${pct(before)} → ${pct(after)}` : pct(before) }));
}

function summaryTable(before, after) {
  const row = (metric, label) => {
    const b = before?.[metric];
    const a = after?.[metric];
    return h('tr', {},
      h('th', { scope: 'row', 'data-label': 'Resource', text: label }),
      h('td', { class: 'num', 'data-label': 'Mean', text: `${pct(b?.mean)} → ${pct(a?.mean)}` }),
      h('td', { class: 'num', 'data-label': 'Spread', text: `${pct(b?.stddev)} → ${pct(a?.stddev)}` }),
      h('td', { class: 'num', 'data-label': 'Min–max', text: `${pct(b?.min)}–${pct(b?.max)} → ${pct(a?.min)}–${pct(a?.max)}` }),
      h('td', { class: 'num', 'data-label': 'Above / below', text: `${b?.above ?? 0} / ${b?.below ?? 0} → ${a?.above ?? 0} / ${a?.below ?? 0}` }));
  };
  return h('div', { class: 'table-wrap', tabindex: '0', role: 'region', 'aria-label': 'Balance before and after' }, h('table', { class: 'wi-summary cards' },
    h('caption', { text: 'Balance before → after (percent of allocatable)' }),
    h('thead', {}, h('tr', {}, ['Resource', 'Mean', 'Spread (std. dev.)', 'Min–max', 'Nodes above / below thresholds']
      .map((c) => h('th', { scope: 'col', text: c })))),
    h('tbody', {}, METRICS.map(([m, l]) => row(m, l)))));
}

function movesTable(result, compact) {
  const moves = result.moves ?? [];
  const shown = compact ? moves.slice(0, 50) : moves;
  return h('div', {},
    h('div', { class: 'table-wrap', tabindex: '0', role: 'region', 'aria-label': 'Moves' }, h('table', { class: 'wi-moves cards' },
      h('caption', { text: `Moves, in the order they would be placed (${moves.length})` }),
      h('thead', {}, h('tr', {}, ['Decision', 'Pod', 'From', 'To'].map((c) => h('th', { scope: 'col', text: c })))),
      h('tbody', {}, shown.map((m) => h('tr', { class: m.to ? null : 'wi-unplaced', dataset: { decision: m.decision } },
        h('td', { 'data-label': 'Decision' }, h('a', { href: route('decisions', m.decision), text: `#${m.decision}` })),
        h('th', { scope: 'row', class: 'pod', 'data-label': 'Pod' }, h('span', { class: 'ns', text: `${m.pod.namespace}/` }), m.pod.name),
        h('td', { class: 'node', 'data-label': 'From', text: m.from }),
        h('td', { class: 'node', 'data-label': 'To' }, m.to
          ? h('span', { text: m.to })
          : h('span', { class: 'wi-nofit' }, h('strong', { text: 'no node fits' }), m.reason ? h('span', { class: 'sub', text: m.reason.replace(/^no node fits:\s*/, '') }) : null))))))),
    shown.length < moves.length ? h('p', { class: 'muted', text: `The first ${shown.length} of ${moves.length} moves are listed.` }) : null);
}

function nodesSection(result, compact) {
  const thresholds = result.thresholds ?? [];
  const basis = thresholds[0]?.basis ?? 'requested';
  const after = new Map((result.after?.nodes ?? []).map((n) => [n.name, n]));
  const touched = new Set();
  for (const m of result.moves ?? []) {
    touched.add(m.from);
    if (m.to) touched.add(m.to);
  }
  const all = result.before?.nodes ?? [];
  const nodes = all.filter((n) => touched.has(n.name));
  const listed = nodes.slice(0, compact ? 20 : MAX_NODE_ROWS);
  return h('div', { class: 'wi-nodes' },
    h('p', { class: 'muted' },
      `Nodes a move leaves or lands on (${nodes.length} of ${all.length}), ${basis === 'usage' ? 'measured usage' : 'requested'}; `,
      'the upper bar is before, the lower after; ',
      thresholds.length ? 'marks are the profile\'s thresholds (low, high).' : 'no thresholds (the profile has no utilization plugin).'),
    h('ul', { class: 'wi-node-list' }, listed.map((n) => h('li', { class: 'wi-node', dataset: { node: n.name } },
      h('span', { class: 'wi-node-name', text: n.name }),
      METRICS.map(([metric, label]) => bar(metric, label,
        percentOf(n, metric, basis), percentOf(after.get(n.name), metric, basis), thresholds,
        result.before?.summary?.[metric]?.mean ?? null))))),
    listed.length < nodes.length ? h('p', { class: 'muted', text: `${nodes.length - listed.length} more node(s) not drawn.` }) : null);
}

/**
 * The what-if answer as one element. `compact`: for dialogs (the first 50 moves, 20 nodes).
 */
export function renderWhatIf(result, { compact = false } = {}) {
  const moves = result.moves ?? [];
  const unplaced = result.unplaced ?? moves.filter((m) => !m.to).length;
  return h('div', { class: `whatif${compact ? ' compact' : ''}`, dataset: { moves: moves.length, unplaced } },
    h('p', { class: 'wi-headline' },
      h('strong', { text: `${moves.length - unplaced} of ${moves.length} pod(s) would find a node` }),
      unplaced ? h('span', { class: 'wi-nofit', text: `; ${unplaced} would not (no node fits)` }) : null,
      ` in cluster ${result.cluster} (revision ${result.revision}).`),
    summaryTable(result.before?.summary, result.after?.summary),
    moves.length ? movesTable(result, compact) : null,
    moves.length ? nodesSection(result, compact) : null);
}
