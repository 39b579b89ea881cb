// The node heatmap: every node of a cluster as one cell of a <canvas> (readable at 5,000 nodes,
// no DOM element per node), coloured against the profile's thresholds, with a legend, a
// tooltip on hover and on keyboard focus (arrow keys move, Enter selects), and the colour
// rules shared with the threshold bars of the node tables (`band`, `thresholdBar`).
//
// Owns: percentages of a NodeStat (`percentOf`), the thresholds in force for a metric and basis
// (`bandsFor`, deviation thresholds resolved against the mean), drawing.
// Must not: fetch anything or know about routes; the caller gives nodes and an `onSelect`.

import { h } from './dom.js';

export const METRICS = {
  cpu: 'CPU',
  memory: 'Memory',
  pods: 'Pods',
};

/**
 * A node's `metric` as a percentage of what it can hold: `basis` `requested` (requests of its
 * pods) or `usage` (measured, null when the cluster reports none). Pods count the same in both.
 */
export function percentOf(node, metric, basis) {
  if (metric === 'pods') {
    const { count, capacity } = node.pods ?? {};
    return capacity > 0 ? (count / capacity) * 100 : null;
  }
  const r = node[metric];
  if (!r || !(r.allocatable > 0)) return null;
  const value = basis === 'usage' ? r.used : r.requested;
  return value === null || value === undefined ? null : (value / r.allocatable) * 100;
}

function mean(values) {
  return values.length ? values.reduce((a, b) => a + b, 0) / values.length : null;
}

/**
 * The low/high percentages in force for `metric` and `basis` from a /balance `thresholds` list:
 * the first threshold of that basis (else the first one). Deviation thresholds are relative to
 * the mean of `values`. Returns `{low, high, plugin, basis, deviation}` (low/high may be null)
 * or null without thresholds.
 */
export function bandsFor(thresholds, metric, basis, values) {
  if (!thresholds?.length) return null;
  const t = thresholds.find((x) => x.basis === basis) ?? thresholds[0];
  let low = t.low?.[metric] ?? null;
  let high = t.high?.[metric] ?? null;
  if (t.deviation) {
    const m = mean(values.filter((v) => v !== null)) ?? 0;
    low = low === null ? null : Math.max(0, m - low);
    high = high === null ? null : Math.min(100, m + high);
  }
  if (low === null && high === null) return null;
  return { low, high, plugin: t.plugin, basis: t.basis, deviation: Boolean(t.deviation) };
}

/**
 * The bands of `metric` for `nodes` (NodeStat): deviation thresholds are relative to the mean of
 * the Ready nodes, as the server's balance and descheduler compute it.
 */
export function bandsForNodes(thresholds, nodes, metric, basis) {
  return bandsFor(thresholds, metric, basis, nodes.filter((n) => n.ready).map((n) => percentOf(n, metric, basis)));
}

/**
 * `below` (at or under the low level: underutilized, as descheduler counts it), `above`
 * (strictly over the high level), `within`, or `none` (no value).
 */
export function band(value, bands) {
  if (value === null || value === undefined) return 'none';
  if (!bands) return 'within';
  if (bands.high !== null && value > bands.high) return 'above';
  if (bands.low !== null && value <= bands.low) return 'below';
  return 'within';
}

const NO_DATA = '#e3e6ea';

/** The fill of a cell: blue shades below the low threshold, grey-green between, orange to red above. */
function colour(value, bands) {
  if (value === null || value === undefined) return NO_DATA;
  const v = Math.max(0, value);
  if (!bands) {
    // No thresholds: one sequential blue scale, light (idle) to dark (full).
    const t = Math.min(v, 100) / 100;
    return mix([222, 235, 247], [8, 48, 107], t);
  }
  const which = band(v, bands);
  if (which === 'below') {
    const t = bands.low > 0 ? 1 - v / bands.low : 1;
    return mix([158, 202, 225], [33, 102, 172], t);
  }
  if (which === 'above') {
    const span = Math.max(1, 100 - bands.high);
    const t = Math.min(1, (v - bands.high) / span);
    return mix([253, 174, 97], [165, 15, 21], t);
  }
  return mix([199, 233, 192], [116, 196, 118], bands.high !== null && bands.low !== null && bands.high > bands.low
    ? (v - bands.low) / (bands.high - bands.low) : 0.5);
}

function mix(a, b, t) {
  const c = a.map((x, i) => Math.round(x + (b[i] - x) * Math.max(0, Math.min(1, t))));
  return `rgb(${c[0]}, ${c[1]}, ${c[2]})`;
}

function fmt(value) {
  return value === null || value === undefined ? 'no data' : `${value.toFixed(1)}%`;
}

/** "above the high threshold 80%" and the like: the band in words, for tooltips and labels. */
export function bandWords(value, bands) {
  const which = band(value, bands);
  if (which === 'none') return 'no measurement';
  if (!bands) return '';
  if (which === 'above') return `above the high threshold ${bands.high.toFixed(0)}%`;
  if (which === 'below') return `at or below the low threshold ${bands.low.toFixed(0)}%`;
  return 'within the thresholds';
}

/**
 * A horizontal bar of a percentage coloured by its band, with the thresholds drawn as ticks and
 * the value (and band, in words) as text, so colour is never the only cue.
 */
export function thresholdBar(label, value, bands, detail) {
  const which = band(value, bands);
  const words = bandWords(value, bands);
  const fill = h('span', { class: `tbar-fill band-${which}` });
  fill.style.width = `${Math.min(Math.max(value ?? 0, 0), 100)}%`;
  const track = h('span', { class: 'tbar-track' }, fill);
  for (const [kind, at] of [['low', bands?.low], ['high', bands?.high]]) {
    if (at === null || at === undefined) continue;
    const tick = h('span', { class: `tbar-tick tbar-${kind}` });
    tick.style.left = `${Math.min(at, 100)}%`;
    track.appendChild(tick);
  }
  const marker = which === 'above' ? ' ▲' : which === 'below' ? ' ▼' : '';
  // A native <meter> (visually hidden) carries the value for assistive technology; the
  // drawn track and text are for the eye.
  const meter = h('meter', {
    class: 'visually-hidden', min: 0, max: 100, value: Math.min(Math.max(value ?? 0, 0), 100),
    'aria-label': `${label} ${fmt(value)}${words ? `, ${words}` : ''}${detail ? ` (${detail})` : ''}`,
  });
  if (bands?.low !== null && bands?.low !== undefined) meter.low = bands.low;
  if (bands?.high !== null && bands?.high !== undefined) meter.high = bands.high;
  return h('span', { class: 'tbar', title: detail ?? null },
    meter,
    h('span', { class: 'tbar-visual', 'aria-hidden': 'true' }, track,
      h('span', { class: 'tbar-text', text: value === null || value === undefined ? '—' : `${value.toFixed(0)}%${marker}` })),
    detail && h('span', { class: 'tbar-detail', 'aria-hidden': 'true', text: detail }));
}

/** The legend of a heatmap: the colour bands with their thresholds, in words. */
function legend(bands, metric, basis) {
  const swatch = (fill, text) => {
    const s = h('span', { class: 'swatch', 'aria-hidden': 'true' });
    s.style.background = fill;
    return h('li', {}, s, text);
  };
  const what = `${METRICS[metric]} ${metric === 'pods' ? 'pods of capacity' : basis === 'usage' ? 'measured usage' : 'requested'}`;
  const items = bands
    ? [
      bands.low !== null && swatch(colour(bands.low / 2, bands), `up to ${bands.low.toFixed(0)}% (low threshold: underutilized)`),
      swatch(colour(((bands.low ?? 0) + (bands.high ?? 100)) / 2, bands), `within the thresholds`),
      bands.high !== null && swatch(colour(Math.min(100, bands.high + 10), bands), `above ${bands.high.toFixed(0)}% (high threshold: overutilized)`),
    ]
    : [swatch(colour(10, null), '0%'), swatch(colour(50, null), '50%'), swatch(colour(100, null), '100% of allocatable')];
  const source = bands
    ? `Thresholds of ${bands.plugin} (${bands.basis}${bands.deviation ? ', relative to the mean' : ''}).`
    : 'No thresholds: pick a profile with LowNodeUtilization, HighNodeUtilization or LowNodeLoad to colour against them.';
  return h('div', { class: 'heatmap-legend' },
    h('p', { class: 'legend-title', text: `${what}, % per node` }),
    h('ul', {}, items, swatch(NO_DATA, 'no measurement'),
      h('li', {}, h('span', { class: 'swatch swatch-down', 'aria-hidden': 'true' }), 'not ready or cordoned (dark corner)')),
    h('p', { class: 'help', text: source }));
}

/**
 * A canvas heatmap of `nodes` (NodeStat objects) for one `metric` (`cpu`, `memory`, `pods`)
 * and `basis` (`requested` or `usage`). Options: `thresholds` (from /balance), `onSelect(node)`
 * (click or Enter), `label` (accessible name), `selected` (a node name to outline).
 * Returns a <figure>; `figure.renderMs` says how long the first drawing took.
 */
export function renderHeatmap(nodes, { metric = 'cpu', basis = 'requested', thresholds = [], onSelect, label, selected } = {}) {
  const started = performance.now();
  const values = nodes.map((n) => percentOf(n, metric, basis));
  const bands = bandsForNodes(thresholds, nodes, metric, basis);
  const canvas = h('canvas', {
    class: 'heatmap-canvas', tabindex: '0', role: 'img',
    'aria-label': `${label ?? 'Node heatmap'}: ${nodes.length} nodes. Use the arrow keys to move between nodes and Enter to open one; the tables below list the same nodes.`,
  });
  const tooltip = h('div', { class: 'heatmap-tooltip', hidden: true, 'aria-hidden': 'true' });
  const live = h('p', { class: 'visually-hidden', 'aria-live': 'polite' });
  const wrap = h('div', { class: 'heatmap-wrap' }, canvas, tooltip);
  const figure = h('figure', { class: 'heatmap' }, wrap, live, legend(bands, metric, basis));

  let cell = 12;
  let cols = 1;
  const gap = 1;
  let focusIndex = -1;
  let selectedIndex = selected ? nodes.findIndex((n) => n.name === selected) : -1;

  const layout = () => {
    const width = Math.max(240, wrap.clientWidth || figure.parentElement?.clientWidth || 960);
    // Big enough to hover at a few hundred nodes, still on one screen at thousands.
    const target = Math.sqrt((width * 520) / Math.max(1, nodes.length));
    cell = Math.max(5, Math.min(28, Math.floor(target) - gap));
    cols = Math.max(1, Math.floor(width / (cell + gap)));
    const rows = Math.ceil(nodes.length / cols);
    const dpr = window.devicePixelRatio || 1;
    canvas.width = Math.ceil(cols * (cell + gap) * dpr);
    canvas.height = Math.ceil(Math.max(1, rows) * (cell + gap) * dpr);
    canvas.style.width = `${cols * (cell + gap)}px`;
    canvas.style.height = `${Math.max(1, rows) * (cell + gap)}px`;
  };

  const draw = () => {
    const ctx2d = canvas.getContext('2d');
    const dpr = window.devicePixelRatio || 1;
    ctx2d.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx2d.clearRect(0, 0, canvas.width, canvas.height);
    const step = cell + gap;
    for (let i = 0; i < nodes.length; i += 1) {
      const x = (i % cols) * step;
      const y = Math.floor(i / cols) * step;
      ctx2d.fillStyle = colour(values[i], bands);
      ctx2d.fillRect(x, y, cell, cell);
      const n = nodes[i];
      if (!n.ready || n.unschedulable) {
        ctx2d.fillStyle = '#1c2330';
        ctx2d.beginPath();
        ctx2d.moveTo(x, y);
        ctx2d.lineTo(x + Math.max(3, cell / 2), y);
        ctx2d.lineTo(x, y + Math.max(3, cell / 2));
        ctx2d.fill();
      }
    }
    for (const [index, outer] of [[selectedIndex, '#1c2330'], [focusIndex, '#1f4e79']]) {
      if (index < 0) continue;
      const x = (index % cols) * step;
      const y = Math.floor(index / cols) * step;
      ctx2d.lineWidth = 2;
      ctx2d.strokeStyle = outer;
      ctx2d.strokeRect(x - 1, y - 1, cell + 2, cell + 2);
      ctx2d.strokeStyle = '#ffffff';
      ctx2d.lineWidth = 1;
      ctx2d.strokeRect(x + 1.5, y + 1.5, cell - 3, cell - 3);
    }
  };

  const describe = (i) => {
    const n = nodes[i];
    const words = bandWords(values[i], bands);
    const state = !n.ready ? ', NotReady' : n.unschedulable ? ', cordoned' : '';
    return `${n.name}: ${METRICS[metric]} ${fmt(values[i])}${words ? ` (${words})` : ''}${state}`;
  };

  const showTip = (i, px, py) => {
    if (i < 0) {
      tooltip.hidden = true;
      return;
    }
    const n = nodes[i];
    const lines = Object.keys(METRICS).map((m) => `${METRICS[m]}: ${fmt(percentOf(n, m, basis))}`);
    const words = bandWords(values[i], bands);
    const state = !n.ready ? 'NotReady' : n.unschedulable ? 'cordoned' : '';
    tooltip.replaceChildren(...[h('strong', { text: n.name }), h('br'), words, words && h('br'), lines.join(' · '),
      state && h('br'), state].filter(Boolean));
    tooltip.hidden = false;
    const maxLeft = Math.max(0, wrap.clientWidth - 260);
    tooltip.style.left = `${Math.min(px + 14, maxLeft)}px`;
    tooltip.style.top = `${py + 14}px`;
  };

  const indexAt = (event) => {
    const rect = canvas.getBoundingClientRect();
    const x = event.clientX - rect.left;
    const y = event.clientY - rect.top;
    const step = cell + gap;
    const col = Math.floor(x / step);
    const row = Math.floor(y / step);
    if (col < 0 || col >= cols) return -1;
    const i = row * cols + col;
    return i >= 0 && i < nodes.length ? i : -1;
  };

  const cellCentre = (i) => {
    const step = cell + gap;
    return [(i % cols) * step + cell / 2, Math.floor(i / cols) * step + cell / 2];
  };

  canvas.addEventListener('mousemove', (event) => {
    const i = indexAt(event);
    const rect = canvas.getBoundingClientRect();
    canvas.style.cursor = i >= 0 ? 'pointer' : 'default';
    showTip(i, event.clientX - rect.left, event.clientY - rect.top);
  });
  canvas.addEventListener('mouseleave', () => { tooltip.hidden = true; });
  canvas.addEventListener('click', (event) => {
    const i = indexAt(event);
    if (i < 0) return;
    selectedIndex = i;
    draw();
    onSelect?.(nodes[i]);
  });
  canvas.addEventListener('focus', () => {
    if (focusIndex < 0 && nodes.length) focusIndex = selectedIndex >= 0 ? selectedIndex : 0;
    draw();
    if (focusIndex >= 0) {
      const [x, y] = cellCentre(focusIndex);
      showTip(focusIndex, x, y);
      live.textContent = describe(focusIndex);
    }
  });
  canvas.addEventListener('blur', () => {
    tooltip.hidden = true;
    const was = focusIndex;
    focusIndex = -1;
    if (was >= 0) draw();
  });
  canvas.addEventListener('keydown', (event) => {
    if (!nodes.length) return;
    const moves = {
      ArrowRight: 1, ArrowLeft: -1, ArrowDown: cols, ArrowUp: -cols, Home: -Infinity, End: Infinity, PageDown: cols * 10, PageUp: -cols * 10,
    };
    if (event.key in moves) {
      event.preventDefault();
      const d = moves[event.key];
      focusIndex = d === -Infinity ? 0 : d === Infinity ? nodes.length - 1
        : Math.min(nodes.length - 1, Math.max(0, focusIndex + d));
      draw();
      const [x, y] = cellCentre(focusIndex);
      showTip(focusIndex, x, y);
      live.textContent = describe(focusIndex);
    } else if ((event.key === 'Enter' || event.key === ' ') && focusIndex >= 0) {
      event.preventDefault();
      selectedIndex = focusIndex;
      draw();
      onSelect?.(nodes[focusIndex]);
    } else if (event.key === 'Escape') {
      tooltip.hidden = true;
    }
  });

  // Drawn once attached (it needs the width), and again when the width changes.
  let lastWidth = -1;
  const resize = new ResizeObserver(() => {
    const width = wrap.clientWidth;
    if (width === lastWidth) return;
    lastWidth = width;
    layout();
    draw();
  });
  requestAnimationFrame(() => {
    if (!figure.isConnected) return;
    resize.observe(wrap);
  });
  layout();
  draw();
  figure.renderMs = performance.now() - started;
  figure.bands = bands;
  figure.dataset.nodes = String(nodes.length);
  figure.dataset.low = bands?.low ?? '';
  figure.dataset.high = bands?.high ?? '';
  /** Stop following the width (called when the view goes away). */
  figure.dispose = () => resize.disconnect();
  return figure;
}
