// Clusters: the list (with a Kubernetes cluster's connection), a cluster's balance (a canvas
// heatmap of every node against a profile's thresholds, the balance summary, the nodes beyond
// the thresholds and a paged node table as the keyboard and screen-reader path), and the pods
// bound to one node.
//
// Owns: reading GET /clusters/{name}/balance?profile= (NodeStat, thresholds, summary) and
// the cluster view's controls (profile, metric, requested/measured), kept in the URL.
// Must not: draw the heatmap itself (../heatmap.js) or hold the decision/pod-migration views
// (it links to them with the node as a filter).

import { api } from '../api.js';
import {
  append, badge, empty, errorBox, facts, formatBytes, formatCpu, h, loading, replace, route, routeWithQuery, table, time,
} from '../dom.js';
import {
  METRICS, band, bandsForNodes, percentOf, renderHeatmap, thresholdBar,
} from '../heatmap.js';
import { guarded } from './admin-kit.js';

const PAGE_SIZE = 50;

function connectionBadge(kube) {
  if (!kube) return null;
  return badge(kube.connection?.state ?? 'unknown');
}

export async function list(ctx) {
  ctx.setTitle('Clusters');
  const body = h('div', {}, loading('clusters'));
  append(ctx.main, h('h1', { text: 'Clusters' }), body);
  const data = await api('/clusters', { signal: ctx.signal });
  if (data.items.length === 0) {
    replace(body, empty('No clusters yet. Push a snapshot with PUT /api/v1/clusters/{name}/snapshot (see the README), or start the server without --no-demo to get the demo cluster.'));
    return;
  }
  replace(body, table({
    caption: 'Every cluster',
    hiddenCaption: true,
    className: 'clusters cards',
    columns: ['Name', 'Backend', 'Connection', 'Nodes', 'Pods', 'Revision', 'Snapshot time', 'Warnings'],
    rows: data.items.map((c) => h('tr', {},
      h('th', { scope: 'row', 'data-label': 'Name' }, h('a', { href: route('clusters', c.name), text: c.name }), c.loaded ? null : [' ', badge('not loaded')]),
      h('td', { 'data-label': 'Backend', text: c.backend }),
      h('td', { 'data-label': 'Connection' }, connectionBadge(c.kubernetes) ?? '—'),
      h('td', { class: 'num', 'data-label': 'Nodes', text: c.nodes }),
      h('td', { class: 'num', 'data-label': 'Pods', text: c.pods }),
      h('td', { class: 'num', 'data-label': 'Revision', text: c.revision }),
      h('td', { 'data-label': 'Snapshot time' }, time(c.snapshotTime)),
      h('td', { class: 'num', 'data-label': 'Warnings', text: c.warnings.length + (c.kubernetes?.warnings?.length ?? 0) }))),
  }));
}

/** The balance of a cluster against `profile` (GET /clusters/{name}/balance). */
function loadBalance(name, profile, signal) {
  return api(`/clusters/${encodeURIComponent(name)}/balance`, { query: { profile }, signal });
}

function stats(values) {
  const present = values.filter((v) => v !== null && v !== undefined);
  if (!present.length) return null;
  const mean = present.reduce((a, b) => a + b, 0) / present.length;
  const variance = present.reduce((a, b) => a + (b - mean) ** 2, 0) / present.length;
  return { mean, stddev: Math.sqrt(variance), min: Math.min(...present), max: Math.max(...present), count: present.length };
}

/** Mean, spread and counts beyond the thresholds of each metric, for the chosen basis. */
function summarise(balance, basis) {
  return Object.keys(METRICS).map((metric) => {
    // Ready nodes only, as the server's balance (and descheduler) count them.
    const values = balance.nodes.filter((n) => n.ready).map((n) => percentOf(n, metric, basis));
    const s = stats(values);
    const bands = bandsForNodes(balance.thresholds, balance.nodes, metric, basis);
    // The server's figures are of the first threshold's basis (requested without thresholds).
    const server = basis === (balance.thresholds?.[0]?.basis ?? 'requested') ? balance.summary?.[metric] : null;
    let above = 0;
    let below = 0;
    for (const v of values) {
      const b = band(v, bands);
      if (b === 'above') above += 1;
      else if (b === 'below') below += 1;
    }
    return {
      metric,
      mean: server?.mean ?? s?.mean ?? null,
      stddev: server?.stddev ?? s?.stddev ?? null,
      min: server?.min ?? s?.min ?? null,
      max: server?.max ?? s?.max ?? null,
      above: server?.above ?? above,
      below: server?.below ?? below,
      bands,
    };
  });
}

const pct = (v) => (v === null || v === undefined ? '—' : `${v.toFixed(1)}%`);

function nodeState(n) {
  if (!n.ready) return badge('NotReady');
  if (n.unschedulable) return badge('Cordoned');
  return badge('Ready');
}

function amounts(n, metric, basis) {
  if (metric === 'pods') return `${n.pods.count} of ${n.pods.capacity}`;
  const f = metric === 'cpu' ? formatCpu : formatBytes;
  const r = n[metric];
  const v = basis === 'usage' ? r.used : r.requested;
  return v === null || v === undefined ? 'not measured' : `${f(v)} of ${f(r.allocatable)}`;
}

/** The connection of a Kubernetes-backed cluster (`ClusterView.kubernetes`). */
export function kubernetesPanel(kube) {
  const c = kube.connection ?? {};
  const lease = kube.lease ?? {};
  const ms = (v) => (v ? time(new Date(v).toISOString()) : '—');
  return h('section', { class: 'card kube', 'aria-labelledby': 'kube-title' },
    h('h2', { id: 'kube-title', text: 'Kubernetes connection' }),
    facts([
      ['API server', h('code', { text: kube.apiServer })],
      ['Connection', h('span', {}, badge(c.state ?? 'unknown'), c.message ? [' ', c.message] : null)],
      ['State since', ms(c.sinceMs)],
      ['Last sync', ms(c.lastSyncMs)],
      ['Revision', c.revision === null || c.revision === undefined ? '—' : String(c.revision)],
      ['Lease', lease.lease ?? '—'],
      ['Lease holder', lease.holder
        ? `${lease.holder}${lease.held ? ' (this server: it may act)' : ' (another server: this one only watches)'}`
        : 'nobody (free or unknown)'],
      lease.error && ['Lease error', h('span', { class: 'error-inline', text: lease.error })],
      kube.reservationMode !== undefined && ['Reservation mode', String(kube.reservationMode)],
      c.optionalKinds?.length && ['Optional kinds followed', c.optionalKinds.join(', ')],
    ]),
    kube.warnings?.length
      ? h('div', { class: 'notice', role: 'note' }, h('strong', { text: 'Warnings: ' }),
        h('ul', {}, kube.warnings.map((w) => h('li', { text: w }))))
      : null);
}

export async function detail(ctx) {
  const { name } = ctx.params;
  ctx.setTitle(`Cluster ${name}`);
  const state = {
    profile: ctx.query.get('profile'),
    metric: METRICS[ctx.query.get('metric')] ? ctx.query.get('metric') : 'cpu',
    basis: ctx.query.get('basis') === 'usage' ? 'usage' : 'requested',
    selected: ctx.query.get('node'),
    order: ctx.query.get('order') === 'value' ? 'value' : 'name',
    sort: 'name',
    filter: '',
    page: 0,
    cluster: null,
    balance: null,
  };
  const factsBox = h('div', {}, loading('the cluster'));
  const kube = h('div');
  const controls = h('form', { class: 'filters cluster-controls', 'aria-label': 'What the heatmap shows' });
  const notices = h('div', { 'aria-live': 'polite' });
  const summary = h('section', { 'aria-labelledby': 'balance-title' }, h('h2', { id: 'balance-title', text: 'Balance' }), loading('the balance'));
  const heat = h('div', { class: 'heatmap-holder' });
  const panel = h('div', { class: 'node-panel', id: 'node-panel' });
  const beyond = h('section', { 'aria-labelledby': 'beyond-title' });
  const nodesSection = h('section', { 'aria-labelledby': 'nodes-title' });
  append(ctx.main,
    h('p', { class: 'crumbs' }, h('a', { href: '#/clusters', text: 'Clusters' }), ' / ', name),
    h('h1', { text: `Cluster ${name}` }), factsBox, kube, controls, notices, summary,
    h('section', { 'aria-labelledby': 'heatmap-title', class: 'heatmap-section' },
      h('h2', { id: 'heatmap-title', text: 'Heatmap' }),
      h('div', { class: 'heatmap-layout' }, heat, panel)),
    beyond, nodesSection);

  // Without profiles (an error reading them) the view still works, without thresholds.
  const profiles = await api('/profiles', { signal: ctx.signal }).catch((err) => {
    if (err?.name === 'AbortError') throw err;
    return { items: [] };
  });
  const names = profiles.items.map((p) => p.name);
  if (state.profile === null) state.profile = names.includes('default') ? 'default' : (names[0] ?? '');

  let heatmap = null;
  const disposeHeatmap = () => heatmap?.dispose?.();

  const keepInUrl = () => {
    const url = routeWithQuery(route('clusters', name), {
      profile: state.profile, metric: state.metric === 'cpu' ? '' : state.metric,
      basis: state.basis === 'requested' ? '' : state.basis, order: state.order === 'name' ? '' : state.order, node: state.selected,
    });
    history.replaceState(history.state, '', url);
  };

  // ---- controls ----
  const profileSelect = h('select', { id: 'cluster-profile' },
    h('option', { value: '', text: '(none: no thresholds)' }),
    names.map((p) => h('option', { value: p, text: p, selected: p === state.profile })));
  const radios = (group, legendText, options, current) => h('fieldset', { class: 'radios' },
    h('legend', { text: legendText }),
    Object.entries(options).map(([value, text]) => h('label', {},
      h('input', { type: 'radio', name: group, value, checked: value === current }), ` ${text}`)));
  replace(controls,
    h('div', { class: 'field' }, h('label', { for: 'cluster-profile', text: 'Thresholds of profile' }), profileSelect),
    radios('metric', 'Metric', METRICS, state.metric),
    radios('basis', 'Values', { requested: 'Requested', usage: 'Measured usage' }, state.basis),
    radios('order', 'Heatmap order', { name: 'By name', value: 'Fullest first' }, state.order),
    h('button', { type: 'button', class: 'secondary', id: 'cluster-refresh', text: 'Refresh', onclick: () => refresh() }));
  controls.addEventListener('submit', (e) => e.preventDefault());
  controls.addEventListener('change', (event) => {
    const t = event.target;
    if (t === profileSelect) {
      state.profile = profileSelect.value;
      keepInUrl();
      refresh();
      return;
    }
    if (t.name === 'metric') state.metric = t.value;
    if (t.name === 'basis') state.basis = t.value;
    if (t.name === 'order') state.order = t.value;
    state.page = 0;
    keepInUrl();
    draw();
  });

  // ---- rendering ----
  const selectNode = (node, { announce = false } = {}) => {
    state.selected = node?.name ?? null;
    keepInUrl();
    renderPanel();
    if (announce) panel.querySelector('h3')?.focus();
  };

  const renderPanel = () => {
    const n = state.balance?.nodes.find((x) => x.name === state.selected);
    if (!n) {
      replace(panel, h('p', { class: 'help', text: 'Select a node (click it, or focus the heatmap and press Enter) to see its figures and open its pods, decisions and pod migrations.' }));
      return;
    }
    const bandsOf = (metric) => bandsForNodes(state.balance.thresholds, state.balance.nodes, metric, state.basis);
    replace(panel, h('div', { class: 'card' },
      h('h3', { tabindex: '-1', text: `Node ${n.name}` }),
      h('p', {}, nodeState(n)),
      h('div', { class: 'bars' }, Object.keys(METRICS).map((m) => h('div', {},
        h('span', { class: 'bar-label', text: METRICS[m] }),
        thresholdBar(`${METRICS[m]} of ${n.name}`, percentOf(n, m, state.basis), bandsOf(m), amounts(n, m, state.basis))))),
      h('ul', { class: 'links' },
        h('li', {}, h('a', { href: routeWithQuery(route('clusters', name, 'nodes', n.name), { profile: state.profile }), text: 'Pods on this node' })),
        h('li', {}, h('a', { href: routeWithQuery('#/decisions', { cluster: name, node: n.name }), text: 'Decisions for this node' })),
        h('li', {}, h('a', { href: routeWithQuery('#/pod-migrations', { cluster: name, node: n.name }), text: 'Pod migrations of this node' })))));
  };

  const renderSummary = () => {
    const rows = summarise(state.balance, state.basis);
    const unmeasured = state.balance.nodes.filter((n) => percentOf(n, 'cpu', 'usage') === null && percentOf(n, 'memory', 'usage') === null).length;
    const heading = summary.firstChild;
    replace(summary, heading, table({
      caption: `Balance of ${name}: ${state.basis === 'usage' ? 'measured usage' : 'requested'} as % of allocatable${state.profile ? `, thresholds of profile ${state.profile}` : ''}`,
      className: 'balance cards',
      columns: ['Metric', 'Mean', 'Spread (std. dev.)', 'Min', 'Max', 'Above high', 'Below low', 'Thresholds'],
      rows: rows.map((r) => h('tr', { dataset: { metric: r.metric } },
        h('th', { scope: 'row', 'data-label': 'Metric', text: METRICS[r.metric] }),
        h('td', { class: 'num', 'data-label': 'Mean', text: pct(r.mean) }),
        h('td', { class: 'num', 'data-label': 'Spread', text: r.stddev === null ? '—' : `±${r.stddev.toFixed(1)} pts` }),
        h('td', { class: 'num', 'data-label': 'Min', text: pct(r.min) }),
        h('td', { class: 'num', 'data-label': 'Max', text: pct(r.max) }),
        h('td', { class: 'num', 'data-label': 'Above high', text: r.bands?.high !== null && r.bands ? String(r.above) : '—' }),
        h('td', { class: 'num', 'data-label': 'Below low', text: r.bands?.low !== null && r.bands ? String(r.below) : '—' }),
        h('td', { 'data-label': 'Thresholds', text: r.bands ? `${r.bands.low === null ? '—' : `${r.bands.low.toFixed(0)}%`} – ${r.bands.high === null ? '—' : `${r.bands.high.toFixed(0)}%`}${r.bands.deviation ? ' (from the mean)' : ''}` : 'none' }))),
    }), h('p', { class: 'help', text: `Over the ${state.balance.nodes.filter((n) => n.ready).length} Ready nodes of ${state.balance.nodes.length}, as descheduler counts them; above: strictly over the high level, below: at or under the low level.` }),
    state.basis === 'usage' && unmeasured > 0
      ? h('p', { class: 'help', text: `${unmeasured} of ${state.balance.nodes.length} nodes report no measured usage (no NodeMetric or metrics.k8s.io figure); they are left out and drawn grey.` })
      : null);
  };

  const renderBeyond = () => {
    const { metric, basis } = state;
    const nodes = state.balance.nodes;
    const values = nodes.map((n) => percentOf(n, metric, basis));
    const bands = bandsForNodes(state.balance.thresholds, nodes, metric, basis);
    const heading = h('h2', { id: 'beyond-title', text: `Nodes beyond the thresholds (${METRICS[metric]})` });
    if (!bands) {
      replace(beyond, heading, h('p', { class: 'help', text: 'No thresholds for this metric: choose a profile with LowNodeUtilization, HighNodeUtilization or LowNodeLoad.' }));
      return;
    }
    const above = [];
    const below = [];
    // Ready nodes, as the balance summary counts them.
    nodes.forEach((n, i) => {
      if (!n.ready) return;
      const b = band(values[i], bands);
      if (b === 'above') above.push([n, values[i]]);
      else if (b === 'below') below.push([n, values[i]]);
    });
    above.sort((a, b) => b[1] - a[1]);
    below.sort((a, b) => a[1] - b[1]);
    const LIMIT = 100;
    const listOf = (id, title, items) => h('div', { class: 'beyond-list' },
      h('h3', { id, text: `${title}: ${items.length}` }),
      items.length ? h('ul', { 'aria-labelledby': id }, items.slice(0, LIMIT).map(([n, v]) => h('li', {},
        h('button', {
          type: 'button', class: 'link-button', 'aria-controls': 'node-panel',
          text: `${n.name} (${v.toFixed(1)}%)`,
          onclick: () => selectNode(n, { announce: true }),
        }))))
        : h('p', { class: 'help', text: 'None.' }),
      items.length > LIMIT ? h('p', { class: 'help', text: `The first ${LIMIT} are listed; sort the table below by ${METRICS[metric]} for the rest.` }) : null);
    replace(beyond, heading, h('div', { class: 'beyond' },
      bands.high !== null && listOf('above-title', `Above ${bands.high.toFixed(0)}%`, above),
      bands.low !== null && listOf('below-title', `At or below ${bands.low.toFixed(0)}%`, below)));
  };

  const SORTS = {
    name: { label: 'Name', key: (n) => n.name, numeric: false },
    cpu: { label: 'CPU %', key: (n) => percentOf(n, 'cpu', state.basis) ?? -1, numeric: true },
    memory: { label: 'Memory %', key: (n) => percentOf(n, 'memory', state.basis) ?? -1, numeric: true },
    pods: { label: 'Pods %', key: (n) => percentOf(n, 'pods', state.basis) ?? -1, numeric: true },
  };
  const sortSelect = h('select', { id: 'node-sort' },
    Object.entries(SORTS).map(([key, s]) => h('option', { value: key, text: s.label })));
  const filterInput = h('input', { id: 'node-filter', type: 'search', placeholder: 'part of a name' });
  const tableHolder = h('div');
  const pager = h('div', { class: 'pager' });
  const count = h('p', { class: 'muted', 'aria-live': 'polite' });
  sortSelect.addEventListener('change', () => { state.sort = sortSelect.value; state.page = 0; renderTable(); });
  filterInput.addEventListener('input', () => { state.filter = filterInput.value.trim().toLowerCase(); state.page = 0; renderTable(); });
  replace(nodesSection, h('h2', { id: 'nodes-title', text: 'Nodes' }),
    h('div', { class: 'toolbar' },
      h('label', { for: 'node-sort', text: 'Sort by' }), sortSelect,
      h('label', { for: 'node-filter', text: 'Filter' }), filterInput),
    count, tableHolder, pager);

  const renderTable = () => {
    const sort = SORTS[state.sort];
    let items = state.balance.nodes;
    if (state.filter) items = items.filter((n) => n.name.toLowerCase().includes(state.filter));
    items = [...items].sort((a, b) => (sort.numeric
      ? sort.key(b) - sort.key(a)
      : String(sort.key(a)).localeCompare(String(sort.key(b)), undefined, { numeric: true })));
    const pages = Math.max(1, Math.ceil(items.length / PAGE_SIZE));
    state.page = Math.min(state.page, pages - 1);
    const shown = items.slice(state.page * PAGE_SIZE, (state.page + 1) * PAGE_SIZE);
    const bandsOf = Object.fromEntries(Object.keys(METRICS).map((m) => [m, bandsForNodes(state.balance.thresholds, state.balance.nodes, m, state.basis)]));
    const what = state.basis === 'usage' ? 'used' : 'requested';
    replace(tableHolder, table({
      caption: `Nodes of ${name}: ${what} resources as a share of allocatable, coloured by the thresholds`,
      hiddenCaption: true,
      columns: ['Node', 'State', `CPU ${what}`, `Memory ${what}`, 'Pods'],
      className: 'nodes cards',
      rows: shown.map((n) => h('tr', { dataset: { node: n.name } },
        h('th', { scope: 'row', 'data-label': 'Node' }, h('a', { href: routeWithQuery(route('clusters', name, 'nodes', n.name), { profile: state.profile }), text: n.name })),
        h('td', { 'data-label': 'State' }, nodeState(n)),
        ['cpu', 'memory', 'pods'].map((m) => h('td', { 'data-label': METRICS[m] },
          thresholdBar(METRICS[m], percentOf(n, m, state.basis), bandsOf[m], amounts(n, m, state.basis)))))),
    }));
    count.textContent = items.length === state.balance.nodes.length
      ? `${items.length} nodes; page ${state.page + 1} of ${pages}.`
      : `${items.length} of ${state.balance.nodes.length} nodes match; page ${state.page + 1} of ${pages}.`;
    const go = (page) => () => { state.page = page; renderTable(); tableHolder.querySelector('a')?.focus(); };
    replace(pager, pages > 1 ? [
      h('button', { type: 'button', class: 'secondary', text: 'Previous page', disabled: state.page === 0, onclick: go(state.page - 1) }),
      h('span', { class: 'muted', text: ` ${state.page + 1} / ${pages} ` }),
      h('button', { type: 'button', class: 'secondary', text: 'Next page', disabled: state.page >= pages - 1, onclick: go(state.page + 1) }),
    ] : null);
  };

  const draw = () => {
    // A redraw (live refresh, new metric) keeps the keyboard on the heatmap.
    const hadFocus = heatmap?.contains(document.activeElement);
    disposeHeatmap();
    const { metric, basis } = state;
    const nodes = state.balance.nodes;
    const byName = (a, b) => a.name.localeCompare(b.name, undefined, { numeric: true });
    const value = (n) => percentOf(n, metric, basis) ?? -1;
    const sorted = [...nodes].sort(state.order === 'value' ? (a, b) => value(b) - value(a) || byName(a, b) : byName);
    heatmap = renderHeatmap(sorted, {
      metric, basis, thresholds: state.balance.thresholds, selected: state.selected,
      label: `${METRICS[metric]} ${basis === 'usage' ? 'measured usage' : 'requested'} of every node of ${name}, ${state.order === 'value' ? 'fullest first' : 'sorted by name'}`,
      onSelect: (n) => selectNode(n),
    });
    replace(heat, heatmap);
    if (hadFocus) heatmap.querySelector('canvas').focus();
    heat.dataset.renderMs = heatmap.renderMs.toFixed(1);
    renderSummary();
    renderBeyond();
    renderPanel();
    renderTable();
  };

  const renderCluster = () => {
    const cluster = state.cluster;
    replace(factsBox, facts([
      ['Backend', cluster.backend],
      ['Revision', String(cluster.revision)],
      ['Snapshot time', time(cluster.snapshotTime)],
      ['Objects', Object.entries(cluster.counts).map(([k, v]) => `${v} ${k}`).join(', ') || '—'],
    ]), cluster.warnings.length ? h('details', { class: 'warnings' },
      h('summary', { text: `${cluster.warnings.length} warning(s) from the last snapshot` }),
      h('ul', {}, cluster.warnings.map((w) => h('li', { text: w.message ?? JSON.stringify(w) })))) : null,
    guarded(ctx, 'run', 'Starting a run', () => h('p', {},
      h('a', { class: 'button', href: `#/runs?cluster=${encodeURIComponent(name)}`, text: 'Start a run on this cluster' }))));
    replace(kube, cluster.kubernetes ? kubernetesPanel(cluster.kubernetes) : null);
  };

  const renderNotices = () => {
    replace(notices,
      state.profile && state.balance.thresholds?.length === 0
        ? h('p', { class: 'help', text: `Profile ${state.profile} enables no LowNodeUtilization, HighNodeUtilization or LowNodeLoad: no thresholds to colour against.` }) : null);
  };

  const load = async () => {
    const [cluster, balance] = await Promise.all([
      api(`/clusters/${encodeURIComponent(name)}`, { signal: ctx.signal }),
      loadBalance(name, state.profile || undefined, ctx.signal),
    ]);
    state.cluster = cluster;
    state.balance = balance;
  };

  let refreshing = null;
  let again = false;
  const refresh = async () => {
    if (refreshing) { again = true; return; }
    refreshing = (async () => {
      try {
        await load();
        renderCluster();
        renderNotices();
        draw();
      } catch (err) {
        if (err?.name !== 'AbortError' && !ctx.signal.aborted) replace(notices, errorBox(err, 'Refreshing the cluster'));
      }
    })();
    await refreshing;
    refreshing = null;
    if (again) { again = false; refresh(); }
  };

  await load();
  renderCluster();
  renderNotices();
  if (state.balance.nodes.length === 0) {
    replace(summary, summary.firstChild, empty('This cluster has no nodes.'));
    nodesSection.remove();
    return;
  }
  draw();

  // Live: a `cluster` event for this cluster (new revision, connection change) refreshes it.
  let timer = null;
  const off = ctx.live?.on?.('cluster', (event) => {
    if (event?.name !== name) return;
    clearTimeout(timer);
    timer = setTimeout(refresh, 300);
  });
  ctx.onLeave(() => {
    clearTimeout(timer);
    if (typeof off === 'function') off();
    disposeHeatmap();
  });
}

export async function node(ctx) {
  const { name, node: nodeName } = ctx.params;
  const profile = ctx.query.get('profile') ?? '';
  ctx.setTitle(`Node ${nodeName}`);
  const summary = h('div', {}, loading('the node'));
  const pods = h('section', { 'aria-labelledby': 'pods-title' }, h('h2', { id: 'pods-title', text: 'Pods on this node' }), loading('pods'));
  append(ctx.main,
    h('p', { class: 'crumbs' }, h('a', { href: '#/clusters', text: 'Clusters' }), ' / ',
      h('a', { href: routeWithQuery(route('clusters', name), { profile }), text: name }), ' / ', nodeName),
    h('h1', { text: `Node ${nodeName}` }), summary, pods);

  const balance = await loadBalance(name, profile || undefined, ctx.signal);
  const n = balance.nodes.find((x) => x.name === nodeName);
  if (!n) {
    replace(summary, empty(`Cluster ${name} has no node named ${nodeName} (any more).`));
  } else {
    const bar = (metric, basis) => thresholdBar(METRICS[metric], percentOf(n, metric, basis),
      bandsForNodes(balance.thresholds, balance.nodes, metric, basis), amounts(n, metric, basis));
    replace(summary, h('div', { class: 'node-summary' },
      facts([['State', nodeState(n)], ['Pods', `${n.pods.count} of ${n.pods.capacity}`],
        ['Thresholds', profile ? `of profile ${profile}` : 'none (no profile chosen)']]),
      h('div', { class: 'bars' },
        h('p', { class: 'bar-group', text: 'Requested' }),
        ['cpu', 'memory', 'pods'].map((m) => h('div', {}, h('span', { class: 'bar-label', text: METRICS[m] }), bar(m, 'requested'))),
        n.cpu.used !== null || n.memory.used !== null ? [
          h('p', { class: 'bar-group', text: 'Measured usage' }),
          ['cpu', 'memory'].map((m) => h('div', {}, h('span', { class: 'bar-label', text: METRICS[m] }), bar(m, 'usage'))),
        ] : h('p', { class: 'help', text: 'No measured usage for this node.' })),
      h('ul', { class: 'links' },
        h('li', {}, h('a', { href: routeWithQuery('#/decisions', { cluster: name, node: nodeName }), text: 'Decisions for this node' })),
        h('li', {}, h('a', { href: routeWithQuery('#/pod-migrations', { cluster: name, node: nodeName }), text: 'Pod migrations of this node' })))));
  }

  const heading = pods.firstChild;
  const tbody = h('tbody');
  const more = h('button', { type: 'button', class: 'secondary', text: 'Load more pods' });
  const count = h('p', { class: 'muted', 'aria-live': 'polite' });
  let next = null;
  let shown = 0;
  const load = async () => {
    more.disabled = true;
    const page = await api(`/clusters/${encodeURIComponent(name)}/pods`, {
      query: { node: nodeName, limit: 200, cursor: next }, signal: ctx.signal,
    });
    for (const p of page.items) {
      tbody.appendChild(h('tr', {},
        h('td', { 'data-label': 'Namespace', text: p.namespace }),
        h('th', { scope: 'row', 'data-label': 'Pod', text: p.name }),
        h('td', { 'data-label': 'Phase' }, badge(p.phase), p.terminating ? [' ', badge('terminating')] : null),
        h('td', { 'data-label': 'QoS', text: p.qosClass }),
        h('td', { 'data-label': 'Owner', text: p.ownerKind || 'none' }),
        h('td', { class: 'num', 'data-label': 'Priority', text: p.priority ?? '—' }),
        h('td', { class: 'num', 'data-label': 'CPU request', text: formatCpu(p.cpuRequestMillis) }),
        h('td', { class: 'num', 'data-label': 'Memory request', text: formatBytes(p.memoryRequestBytes) })));
    }
    shown += page.items.length;
    next = page.next;
    more.hidden = !next;
    more.disabled = false;
    count.textContent = next ? `Showing ${shown} pods; more are available.` : `${shown} pod(s).`;
    return page;
  };
  more.addEventListener('click', () => load().catch((err) => {
    if (err?.name !== 'AbortError') append(pods, errorBox(err, 'Loading pods'));
  }));
  const first = await load();
  if (first.items.length === 0) {
    replace(pods, heading, empty('No pods are bound to this node.'));
    return;
  }
  replace(pods, heading, h('div', { class: 'table-wrap' }, h('table', { class: 'pods cards' },
    h('caption', { class: 'visually-hidden', text: `Pods on ${nodeName}` }),
    h('thead', {}, h('tr', {}, ['Namespace', 'Pod', 'Phase', 'QoS', 'Owner', 'Priority', 'CPU request', 'Memory request']
      .map((c) => h('th', { scope: 'col', text: c })))),
    tbody)), count, more);
}
