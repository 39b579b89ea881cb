// Clusters: the list, a cluster's nodes with requested cpu/memory/pods as a share of
// allocatable, and the pods bound to one node.

import { api } from '../api.js';
import {
  append, badge, empty, errorBox, facts, formatBytes, formatCpu, h, loading, replace, route, table, time, utilizationBar,
} from '../dom.js';

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
    caption: 'Clusters',
    hiddenCaption: true,
    columns: ['Name', 'Backend', 'Nodes', 'Pods', 'Revision', 'Snapshot time', 'Warnings'],
    rows: data.items.map((c) => h('tr', {},
      h('td', {}, h('a', { href: route('clusters', c.name), text: c.name }), c.loaded ? null : [' ', badge('not loaded')]),
      h('td', { text: c.backend }),
      h('td', { class: 'num', text: c.nodes }),
      h('td', { class: 'num', text: c.pods }),
      h('td', { class: 'num', text: c.revision }),
      h('td', {}, time(c.snapshotTime)),
      h('td', { class: 'num', text: c.warnings.length }))),
  }));
}

const SORTS = {
  name: { label: 'Name', key: (n) => n.name, numeric: false },
  cpu: { label: 'CPU requested %', key: (n) => n.percent.cpu, numeric: true },
  memory: { label: 'Memory requested %', key: (n) => n.percent.memory, numeric: true },
  pods: { label: 'Pods %', key: (n) => n.percent.pods, numeric: true },
};

function nodeState(n) {
  if (!n.ready) return badge('NotReady');
  if (n.unschedulable) return badge('Cordoned');
  return badge('Ready');
}

export async function detail(ctx) {
  const { name } = ctx.params;
  ctx.setTitle(`Cluster ${name}`);
  const summary = h('div', {}, loading('the cluster'));
  const nodesSection = h('section', { 'aria-labelledby': 'nodes-title' },
    h('h2', { id: 'nodes-title', text: 'Nodes' }), loading('nodes'));
  append(ctx.main, 
    h('p', { class: 'crumbs' }, h('a', { href: '#/clusters', text: 'Clusters' }), ' / ', name),
    h('h1', { text: `Cluster ${name}` }), summary, nodesSection);

  const [cluster, nodes] = await Promise.all([
    api(`/clusters/${encodeURIComponent(name)}`, { signal: ctx.signal }),
    api(`/clusters/${encodeURIComponent(name)}/nodes`, { signal: ctx.signal }),
  ]);
  replace(summary, facts([
    ['Backend', cluster.backend],
    ['Revision', String(cluster.revision)],
    ['Snapshot time', time(cluster.snapshotTime)],
    ['Objects', Object.entries(cluster.counts).map(([k, v]) => `${v} ${k}`).join(', ') || '—'],
  ]), cluster.warnings.length ? h('details', { class: 'warnings' },
    h('summary', { text: `${cluster.warnings.length} warning(s) from the last snapshot` }),
    h('ul', {}, cluster.warnings.map((w) => h('li', { text: w.message ?? JSON.stringify(w) })))) : null,
  h('p', {}, h('a', { class: 'button', href: `#/runs?cluster=${encodeURIComponent(name)}`, text: 'Start a run on this cluster' })));

  const heading = nodesSection.firstChild;
  if (nodes.items.length === 0) {
    replace(nodesSection, heading, empty('This cluster has no nodes.'));
    return;
  }
  const sortSelect = h('select', { id: 'node-sort' },
    Object.entries(SORTS).map(([key, s]) => h('option', { value: key, text: s.label })));
  const tableHolder = h('div');
  const draw = () => {
    const sort = SORTS[sortSelect.value];
    const items = [...nodes.items].sort((a, b) => (sort.numeric
      ? sort.key(b) - sort.key(a)
      : String(sort.key(a)).localeCompare(String(sort.key(b)), undefined, { numeric: true })));
    replace(tableHolder, table({
      caption: `Nodes of ${name}: requested resources as a share of allocatable`,
      columns: ['Node', 'State', 'CPU requested', 'Memory requested', 'Pods', 'Pods bound'],
      className: 'nodes',
      rows: items.map((n) => h('tr', {},
        h('th', { scope: 'row' }, h('a', { href: route('clusters', name, 'nodes', n.name), text: n.name })),
        h('td', {}, nodeState(n)),
        h('td', {}, utilizationBar('CPU', n.percent.cpu,
          `${formatCpu(n.requested.cpuMilli)} of ${formatCpu(n.allocatable.cpuMilli)}`)),
        h('td', {}, utilizationBar('Memory', n.percent.memory,
          `${formatBytes(n.requested.memoryBytes)} of ${formatBytes(n.allocatable.memoryBytes)}`)),
        h('td', {}, utilizationBar('Pods', n.percent.pods, `${n.requested.pods} of ${n.allocatable.pods}`)),
        h('td', { class: 'num', text: n.podCount }))),
    }));
  };
  sortSelect.addEventListener('change', draw);
  replace(nodesSection, heading,
    h('div', { class: 'toolbar' }, h('label', { for: 'node-sort', text: 'Sort by' }), sortSelect,
      h('span', { class: 'muted', text: `${nodes.items.length} nodes. Bars: green under 50%, amber from 50%, red from 80%.` })),
    tableHolder);
  draw();
}

export async function node(ctx) {
  const { name, node: nodeName } = ctx.params;
  ctx.setTitle(`Node ${nodeName}`);
  const summary = h('div', {}, loading('the node'));
  const pods = h('section', { 'aria-labelledby': 'pods-title' }, h('h2', { id: 'pods-title', text: 'Pods on this node' }), loading('pods'));
  append(ctx.main, 
    h('p', { class: 'crumbs' }, h('a', { href: '#/clusters', text: 'Clusters' }), ' / ',
      h('a', { href: route('clusters', name), text: name }), ' / ', nodeName),
    h('h1', { text: `Node ${nodeName}` }), summary, pods);

  const nodes = await api(`/clusters/${encodeURIComponent(name)}/nodes`, { signal: ctx.signal });
  const n = nodes.items.find((x) => x.name === nodeName);
  if (!n) {
    replace(summary, empty(`Cluster ${name} has no node named ${nodeName} (any more).`));
  } else {
    replace(summary, h('div', { class: 'node-summary' },
      facts([['State', nodeState(n)], ['Pods bound', String(n.podCount)]]),
      h('div', { class: 'bars' },
        h('div', {}, h('span', { class: 'bar-label', text: 'CPU' }), utilizationBar('CPU', n.percent.cpu, `${formatCpu(n.requested.cpuMilli)} of ${formatCpu(n.allocatable.cpuMilli)}`)),
        h('div', {}, h('span', { class: 'bar-label', text: 'Memory' }), utilizationBar('Memory', n.percent.memory, `${formatBytes(n.requested.memoryBytes)} of ${formatBytes(n.allocatable.memoryBytes)}`)),
        h('div', {}, h('span', { class: 'bar-label', text: 'Pods' }), utilizationBar('Pods', n.percent.pods, `${n.requested.pods} of ${n.allocatable.pods}`)))));
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
        h('td', { text: p.namespace }),
        h('th', { scope: 'row', text: p.name }),
        h('td', {}, badge(p.phase), p.terminating ? [' ', badge('terminating')] : null),
        h('td', { text: p.qosClass }),
        h('td', { text: p.ownerKind || 'none' }),
        h('td', { class: 'num', text: p.priority ?? '—' }),
        h('td', { class: 'num', text: formatCpu(p.cpuRequestMillis) }),
        h('td', { class: 'num', text: formatBytes(p.memoryRequestBytes) })));
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
  replace(pods, heading, h('div', { class: 'table-wrap' }, h('table', {},
    h('caption', { class: 'visually-hidden', text: `Pods on ${nodeName}` }),
    h('thead', {}, h('tr', {}, ['Namespace', 'Pod', 'Phase', 'QoS', 'Owner', 'Priority', 'CPU request', 'Memory request']
      .map((c) => h('th', { scope: 'col', text: c })))),
    tbody)), count, more);
}

