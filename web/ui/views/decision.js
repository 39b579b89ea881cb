// One decision (#/decisions/:id): its reason, plugin, status history with comments, the what-if
// of this one move, its pod migration, and approve / reject when it is still open and the role
// may. Live: refetched when its status changes.
//
// Owns: the decision page. Must not: duplicate the decide dialog (decisions.js owns it).

import { api } from '../api.js';
import {
  append, empty, errorBox, facts, h, loading, replace, route, routeWithQuery, table, time,
} from '../dom.js';
import { debounce } from '../live.js';
import { allowed, roleNotice } from '../session.js';
import { renderWhatIf, whatIfBody } from '../whatif.js';
import { actionable, decideDialog, outcomeText, statusCell } from './decisions.js';

export async function detail(ctx) {
  const id = ctx.params.id;
  ctx.setTitle(`Decision #${id}`);
  const summary = h('div', {}, loading('the decision'));
  const actions = h('div', { class: 'toolbar' });
  const result = h('div', { class: 'result', 'aria-live': 'polite' });
  const history = h('section', { 'aria-labelledby': 'history-title' }, h('h2', { id: 'history-title', text: 'History and comments' }));
  const whatIf = h('section', { 'aria-labelledby': 'whatif-title' }, h('h2', { id: 'whatif-title', text: 'What if it is approved' }));
  const dialog = decideDialog();
  append(ctx.main,
    h('p', { class: 'crumbs' }, h('a', { href: '#/decisions', text: 'Decisions' }), ' / ', `#${id}`),
    h('h1', { text: `Decision #${id}` }), summary, actions, result, history, whatIf, dialog.element);

  let shownStatus = null;
  const draw = (d) => {
    replace(summary, facts([
      ['Status', h('span', {}, statusCell(d))],
      ['Pod', h('span', {}, `${d.pod.namespace}/${d.pod.name}`, h('span', { class: 'sub', text: `uid ${d.pod.uid}` }))],
      ['Node', h('a', { href: route('clusters', d.cluster, 'nodes', d.node), text: d.node })],
      ['Cluster', h('a', { href: route('clusters', d.cluster), text: d.cluster })],
      ['Profile', h('a', { href: route('profiles', d.profile), text: d.profile })],
      ['Plugin', h('span', {}, d.plugin, h('span', { class: 'sub', text: `plugin set ${d.pluginSet}` }))],
      ['Reason', h('strong', { class: 'reason', text: d.reason })],
      ['Run', h('span', {}, h('a', { href: route('runs', d.run), text: `#${d.run}` }), d.dryRun ? ' (a dry run: never approvable)' : '', ' · ',
        h('a', { href: routeWithQuery('#/decisions', { run: d.run }), text: 'its decisions' }))],
      d.supersededBy ? ['Superseded by', h('a', { href: route('decisions', d.supersededBy), text: `Decision #${d.supersededBy}` })] : null,
      ['Pod migration', d.podMigration ? h('a', { href: route('pod-migrations', d.podMigration), text: `Pod migration #${d.podMigration}` }) : '—'],
      ['Proposed', time(d.createdAt)],
      ['Updated', time(d.updatedAt)],
    ]));
    const open = actionable(d);
    replace(actions, open && allowed(ctx.me, 'approve') ? [
      h('button', { type: 'button', text: 'Approve…', onclick: () => decide('approve', d) }),
      h('button', { type: 'button', class: 'danger', text: 'Reject…', onclick: () => decide('reject', d) }),
    ] : null, open ? roleNotice(ctx.me, 'approve') : null);
    const steps = d.history ?? [];
    replace(history, history.firstChild, steps.length === 0 ? empty('No status change yet.') : table({
      caption: 'Status changes, oldest first',
      hiddenCaption: true,
      className: 'history cards',
      columns: ['Time', 'Change', 'By', 'Comment'],
      rows: steps.map((t) => h('tr', {},
        h('td', { 'data-label': 'Time' }, time(t.time)),
        h('th', { scope: 'row', 'data-label': 'Change' }, `${t.from} → ${t.to}`),
        h('td', { 'data-label': 'By', text: t.actor }),
        h('td', { class: 'reason', 'data-label': 'Comment', text: t.comment ?? '—' }))),
    }));
    shownStatus = d.status;
  };

  async function decide(verb, d) {
    const answer = await dialog.ask({
      verb,
      heading: `${verb === 'approve' ? 'Approve' : 'Reject'} decision #${d.id}`,
      description: verb === 'approve' ? `Move ${d.pod.namespace}/${d.pod.name} off ${d.node} (${d.plugin}).`
        : `Keep ${d.pod.namespace}/${d.pod.name} on ${d.node}. Say why, for the audit log.`,
      body: { ids: [d.id] },
      whatIf: () => [{ cluster: d.cluster, body: whatIfBody({ ids: [d.id] }) }],
      signal: ctx.signal,
    });
    if (!answer) return;
    replace(result, h('p', { class: 'ok', text: outcomeText(verb, answer) }));
    draw(await fetchOne());
  }

  const fetchOne = () => api(`/decisions/${encodeURIComponent(id)}`, { signal: ctx.signal });
  const d = await fetchOne();
  draw(d);

  // Live: this decision's status changes.
  const refresh = debounce(() => fetchOne().then((fresh) => {
    if (fresh.status !== shownStatus) draw(fresh);
  }).catch((err) => {
    if (err?.name !== 'AbortError') replace(result, errorBox(err, 'Refreshing'));
  }), 300);
  ctx.live.on('decisions', (data, meta) => {
    if (meta?.reset || (data.ids ?? []).includes(Number(id))) refresh();
  });
  ctx.live.on('migration', (data, meta) => {
    if (meta?.reset || data.decision === Number(id)) refresh();
  });
  ctx.onLeave(() => refresh.cancel());

  // What-if of this one move (only meaningful while it can still be approved).
  if (d.status === 'proposed') {
    if (d.dryRun || d.supersededBy) {
      append(whatIf, h('p', { class: 'notice', text: d.dryRun
        ? 'This decision came from a dry run and can never be approved; the simulation shows what the move would do.'
        : 'This decision was superseded; the simulation shows what the move would have done.' }));
    }
    append(whatIf, loading('the what-if'));
    try {
      const r = await api(`/clusters/${encodeURIComponent(d.cluster)}/what-if`, { method: 'POST', body: whatIfBody({ ids: [d.id] }), signal: ctx.signal });
      replace(whatIf, whatIf.firstChild, renderWhatIf(r));
    } catch (err) {
      if (err?.name === 'AbortError') throw err;
      replace(whatIf, whatIf.firstChild, errorBox(err, 'What-if'));
    }
  } else {
    append(whatIf, h('p', { class: 'muted', text: `The decision is ${d.status}: there is nothing left to simulate.` }));
  }
}
