// Runs: start one (cluster + profile, dry run; only for roles that may), list them (refreshed
// live), and one run's per-policy timing and outcome with the what-if of all its moves.

import { api } from '../api.js';
import {
  append, badge, empty, errorBox, facts, formatMs, h, loading, prepend, replace, route, routeWithQuery, table, time,
} from '../dom.js';
import { debounce } from '../live.js';
import { allowed, roleNotice } from '../session.js';
import { renderWhatIf, whatIfBody } from '../whatif.js';

function duration(run) {
  if (run.report) return formatMs(run.report.durationMs);
  if (run.startedAt && run.finishedAt) {
    return formatMs(new Date(run.finishedAt).getTime() - new Date(run.startedAt).getTime());
  }
  return '—';
}

const RUN_COLUMNS = ['Run', 'Status', 'Cluster', 'Profile', 'Trigger', 'Proposals', 'Started', 'Duration', 'Decisions'];

function runRow(run) {
  const tr = h('tr', { dataset: { id: run.id } },
    h('th', { scope: 'row' }, h('a', { href: route('runs', run.id), text: `#${run.id}` })),
    h('td', {}, badge(run.status), run.dryRun ? [' ', badge('dry run')] : null),
    h('td', {}, h('a', { href: route('clusters', run.cluster), text: run.cluster })),
    h('td', { text: run.profile }),
    h('td', { text: run.trigger ?? '—' }),
    h('td', { class: 'num', text: run.proposals ?? '—' }),
    h('td', {}, time(run.startedAt)),
    h('td', { class: 'num', text: duration(run) }),
    h('td', {}, run.proposals ? h('a', { href: routeWithQuery('#/decisions', { run: run.id }), 'aria-label': `Review decisions of run #${run.id}`, text: 'Review' }) : null));
  [...tr.children].forEach((cell, i) => cell.setAttribute('data-label', RUN_COLUMNS[i]));
  return tr;
}

export async function list(ctx) {
  ctx.setTitle('Runs');
  const formHolder = h('section', { 'aria-labelledby': 'start-title', class: 'card' },
    h('h2', { id: 'start-title', text: 'Start a run' }), loading('clusters and profiles'));
  const listHolder = h('section', { 'aria-labelledby': 'runs-title' },
    h('h2', { id: 'runs-title', text: 'Recent runs' }), loading('runs'));
  append(ctx.main, h('h1', { text: 'Runs' }),
    h('p', { class: 'lead', text: 'A run evaluates one profile over a cluster\'s current snapshot, as one descheduler cycle, and records every proposed pod move as a decision.' }),
    formHolder, listHolder);

  const [clusters, profiles, runs] = await Promise.all([
    api('/clusters', { signal: ctx.signal }),
    api('/profiles', { signal: ctx.signal }),
    api('/runs', { query: { limit: 25 }, signal: ctx.signal }),
  ]);

  // The form.
  const wanted = ctx.query.get('cluster');
  const wantedProfile = ctx.query.get('profile') ?? 'default';
  const clusterSelect = h('select', { id: 'run-cluster', name: 'cluster', required: true },
    clusters.items.map((c) => h('option', { value: c.name, text: c.name, selected: c.name === wanted })));
  const profileSelect = h('select', { id: 'run-profile', name: 'profile', required: true },
    profiles.items.map((p) => h('option', { value: p.name, text: p.name, selected: p.name === wantedProfile })));
  const dryRun = h('input', { id: 'run-dry', name: 'dryRun', type: 'checkbox', 'aria-describedby': 'run-dry-help' });
  const submit = h('button', { type: 'submit', text: 'Start run' });
  const result = h('div', { class: 'result', 'aria-live': 'polite' });
  const form = h('form', { class: 'form-grid' },
    h('div', { class: 'field' }, h('label', { for: 'run-cluster', text: 'Cluster' }), clusterSelect),
    h('div', { class: 'field' }, h('label', { for: 'run-profile', text: 'Profile' }), profileSelect),
    h('div', { class: 'field checkbox' }, dryRun, h('label', { for: 'run-dry', text: 'Dry run' }),
      h('span', { id: 'run-dry-help', class: 'help', text: 'Only propose: the decisions are recorded but never executed.' })),
    h('div', { class: 'actions' }, submit));
  const tbody = h('tbody', {}, runs.items.map(runRow));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    submit.disabled = true;
    replace(result, h('p', { class: 'state loading', role: 'status' }, h('span', { class: 'spinner', 'aria-hidden': 'true' }),
      `Running profile ${profileSelect.value} on ${clusterSelect.value}…`));
    const body = { cluster: clusterSelect.value, profile: profileSelect.value };
    if (dryRun.checked) body.dryRun = true;
    try {
      const run = await api('/runs', { method: 'POST', body, signal: ctx.signal });
      replace(result, h('p', { class: 'ok' },
        `Run #${run.id} ${run.status}: ${run.proposals ?? 0} proposal(s). `,
        h('a', { href: route('runs', run.id), text: 'See the run' }),
        run.proposals ? [' · ', h('a', { href: routeWithQuery('#/decisions', { run: run.id }), text: 'Review its decisions' })] : null));
      prepend(tbody, runRow(run));
      showList();
    } catch (err) {
      if (err?.name === 'AbortError') return;
      replace(result, errorBox(err, 'Starting the run'));
    } finally {
      submit.disabled = false;
    }
  });
  if (clusters.items.length === 0 || profiles.items.length === 0) {
    replace(formHolder, formHolder.firstChild, empty(clusters.items.length === 0
      ? 'There is no cluster to run on yet. Push a snapshot first.'
      : 'There is no profile yet. Store one with PUT /api/v1/profiles/{name}.'));
  } else if (!allowed(ctx.me, 'run')) {
    replace(formHolder, formHolder.firstChild, roleNotice(ctx.me, 'run'));
  } else {
    replace(formHolder, formHolder.firstChild, form, result);
  }

  const listHeading = listHolder.firstChild;
  const showList = () => {
    replace(listHolder, listHeading, h('div', { class: 'table-wrap' }, h('table', { class: 'runs cards' },
      h('caption', { class: 'visually-hidden', text: 'Runs, newest first' }),
      h('thead', {}, h('tr', {}, RUN_COLUMNS.map((c) => h('th', { scope: 'col', text: c })))),
      tbody)),
    runs.next ? h('p', { class: 'muted', text: 'Showing the 25 newest runs.' }) : null);
  };
  if (runs.items.length === 0) {
    replace(listHolder, listHeading, empty('No runs yet. Start one above.'));
  } else {
    showList();
  }

  // Live: a run started or finished anywhere (a schedule, another user) shows up here.
  const liveRefresh = debounce(async () => {
    try {
      const fresh = await api('/runs', { query: { limit: 25 }, signal: ctx.signal });
      tbody.replaceChildren(...fresh.items.map(runRow));
      runs.next = fresh.next;
      if (fresh.items.length) showList();
    } catch (err) {
      if (err?.name !== 'AbortError') replace(result, errorBox(err, 'Refreshing the runs'));
    }
  }, 400);
  ctx.live.on('run', liveRefresh);
  ctx.onLeave(() => liveRefresh.cancel());
}

function outcome(policy) {
  if (!policy.error) return badge('ok');
  return h('span', {}, badge('failed'), ' ', h('strong', { text: policy.error.kind ?? 'error' }), ': ', policy.error.message ?? '');
}

export async function detail(ctx) {
  const id = ctx.params.id;
  ctx.setTitle(`Run #${id}`);
  const body = h('div', {}, loading('the run'));
  append(ctx.main, 
    h('p', { class: 'crumbs' }, h('a', { href: '#/runs', text: 'Runs' }), ' / ', `#${id}`),
    h('h1', { text: `Run #${id}` }), body);
  const whatIf = h('section', { 'aria-labelledby': 'run-whatif-title' }, h('h2', { id: 'run-whatif-title', text: 'What if every proposal of this run is approved' }));
  const run = await api(`/runs/${encodeURIComponent(id)}`, { signal: ctx.signal });
  const report = run.report;
  replace(body, 
    facts([
      ['Status', badge(run.status)],
      ['Cluster', h('a', { href: route('clusters', run.cluster), text: run.cluster })],
      ['Cluster revision', String(run.clusterRevision)],
      ['Profile', h('a', { href: route('profiles', run.profile), text: run.profile })],
      ['Dry run', run.dryRun ? 'yes: its decisions can never be approved' : 'no'],
      ['Trigger', run.trigger ?? '—'],
      ['Started', time(run.startedAt)],
      ['Finished', time(run.finishedAt)],
      ['Duration', duration(run)],
      report ? ['Nodes in scope', String(report.nodesInScope)] : null,
      ['Proposals', run.proposals === null || run.proposals === undefined ? '—'
        : h('span', {}, String(run.proposals), run.proposals
          ? [' · ', h('a', { href: routeWithQuery('#/decisions', { run: run.id }), text: 'Review decisions' })] : null)],
      run.decisionsPruned ? ['Pruned', h('span', {}, `${run.decisionsPruned} of its decisions were deleted by retention`,
        run.decisionsPrunedAt ? [' (the last ', time(run.decisionsPrunedAt), ')'] : null)] : null,
    ]),
    run.error ? h('div', { class: 'error', role: 'alert' }, h('p', {}, h('strong', { text: 'The run failed: ' }), run.error)) : null,
    report?.skipped ? h('p', { class: 'notice', text: `The cycle was skipped: ${report.skipped}` }) : null,
    report ? h('section', { 'aria-labelledby': 'policies-title' },
      h('h2', { id: 'policies-title', text: 'Policies' }),
      report.policies.length === 0 ? empty('No policy was evaluated.') : table({
        caption: 'Per-policy timing and outcome, in evaluation order',
        hiddenCaption: true,
        columns: ['Plugin', 'Plugin set', 'Extension point', 'Duration', 'Proposals', 'Refusals', 'Outcome', 'Log'],
        rows: report.policies.map((p) => h('tr', {},
          h('th', { scope: 'row', text: p.plugin }),
          h('td', { text: p.pluginSet }),
          h('td', { text: p.extensionPoint }),
          h('td', { class: 'num', text: formatMs(p.durationMs) }),
          h('td', { class: 'num', text: p.proposals }),
          h('td', { class: 'num', text: p.refusals }),
          h('td', {}, outcome(p)),
          h('td', {}, p.logs.length ? h('details', {},
            h('summary', { text: `${p.logs.length} line(s)${p.logsDropped ? ` (+${p.logsDropped} dropped)` : ''}` }),
            h('ul', { class: 'log' }, p.logs.map((l) => h('li', {}, h('span', { class: `level level-${l.level}`, text: l.level }), ' ', l.message))))
            : h('span', { class: 'muted', text: 'none' })))),
      })) : null,
    whatIf);
  if (!run.proposals) {
    append(whatIf, h('p', { class: 'muted', text: 'The run proposed no move.' }));
    return;
  }
  append(whatIf, loading('the what-if'));
  try {
    const r = await api(`/clusters/${encodeURIComponent(run.cluster)}/what-if`, { method: 'POST', body: whatIfBody({ run: run.id }), signal: ctx.signal });
    replace(whatIf, whatIf.firstChild, run.dryRun ? h('p', { class: 'notice', text: 'A dry run: these moves can never be approved; the simulation shows what they would have done.' }) : null, renderWhatIf(r));
  } catch (err) {
    if (err?.name === 'AbortError') throw err;
    replace(whatIf, whatIf.firstChild, errorBox(err, 'What-if'));
  }
}
