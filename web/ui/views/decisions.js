// Decisions: the approval queue. Newest first with the total, server-side filters and sort (all
// in the URL hash, so a view is a link), paging by cursor, selection of rows or of "all N
// matching", and approve / reject by ids or by filter through one preview dialog (how many,
// which, and the what-if of exactly those moves) with a comment. Live: the list refreshes when
// decisions or runs change. Keyboard: j/k move, x selects, a approves, r rejects, o opens.
//
// Owns: the queue page and the decide dialog (also used by the decision page).
// Must not: send a request per row; every bulk action is one call.

import { api } from '../api.js';
import {
  append, badge, empty, errorBox, h, loading, replace, route, routeWithQuery,
} from '../dom.js';
import { debounce } from '../live.js';
import { allowed, roleNotice, whyNot } from '../session.js';
import { renderWhatIf, whatIfBody } from '../whatif.js';

const STATUSES = ['proposed', 'approved', 'rejected', 'superseded', 'expired', 'executing', 'succeeded', 'failed'];
const SORTS = [
  ['newest', 'Newest first'], ['oldest', 'Oldest first'], ['namespace', 'Namespace'], ['pod', 'Pod'],
  ['node', 'Node'], ['plugin', 'Plugin'], ['status', 'Status'],
];
/** The list filters, in the order of the form (all of them are query names of GET /decisions). */
const FILTERS = ['cluster', 'profile', 'run', 'namespace', 'node', 'plugin', 'status', 'pod'];
/** What approve/reject by filter accepts (status is implied: only proposed ones are acted on). */
const ACTION_FILTERS = ['run', 'plugin', 'namespace', 'node', 'cluster', 'profile', 'pod'];
const PAGE = 100;

export const SHORTCUTS = [
  ['j / k', 'next / previous decision'],
  ['x', 'select or unselect it'],
  ['a', 'approve it (or the selection): opens the preview; Enter confirms'],
  ['r', 'reject it (or the selection)'],
  ['o', 'open its page'],
  ['/', 'search pods'],
];

const podName = (d) => `${d.pod.namespace}/${d.pod.name}`;

/** A decision that may still be approved or rejected. */
export function actionable(d) {
  return d.status === 'proposed' && !d.dryRun && !d.supersededBy;
}

function whatIfError(err) {
  return errorBox(err, 'What-if');
}

/**
 * The approve/reject dialog: previews with `preview: true` (count, sample, what-if), asks for a
 * comment, then acts in one call. `ask(request)` resolves with the answer, or null if cancelled.
 * `request`: {verb: 'approve'|'reject', heading, ids?, filter?, clusters (for what-if), signal}.
 */
export function decideDialog() {
  const title = h('h2', { id: 'decide-title' });
  const what = h('div', { id: 'decide-what', class: 'decide-what' });
  const preview = h('div', { class: 'decide-preview', 'aria-live': 'polite' });
  const whatIf = h('div', { class: 'decide-whatif' });
  const textarea = h('textarea', { id: 'decide-comment', name: 'comment', rows: 2, maxlength: 2000, 'aria-describedby': 'decide-comment-help' });
  const label = h('label', { for: 'decide-comment' });
  const confirm = h('button', { type: 'submit', value: 'confirm' });
  const result = h('div', { class: 'decide-result', 'aria-live': 'polite' });
  const cancel = h('button', { type: 'button', class: 'secondary', text: 'Cancel' });
  const form = h('form', { method: 'dialog' }, title, what, preview, whatIf, label, textarea,
    h('p', { id: 'decide-comment-help', class: 'help', text: 'Recorded with each status change and in the audit log. Ctrl+Enter confirms from here.' }),
    result,
    h('div', { class: 'actions' }, cancel, confirm));
  const dialog = h('dialog', { class: 'dialog wide', 'aria-labelledby': 'decide-title', 'aria-describedby': 'decide-what' }, form);
  let pending = null;
  cancel.addEventListener('click', () => dialog.close('cancel'));
  textarea.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      form.requestSubmit(confirm);
    }
  });
  dialog.addEventListener('close', () => {
    pending?.resolve(null);
    pending = null;
  });
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    if (!pending || confirm.disabled) return;
    const { request, resolve } = pending;
    confirm.disabled = true;
    replace(result, h('p', { class: 'state loading', role: 'status' }, h('span', { class: 'spinner', 'aria-hidden': 'true' }),
      request.verb === 'approve' ? 'Approving…' : 'Rejecting…'));
    try {
      const comment = textarea.value.trim();
      const answer = await api(`/decisions/${request.verb}`, {
        method: 'POST', body: { ...request.body, ...(comment ? { comment } : {}) }, signal: request.signal,
      });
      pending = null;
      dialog.close('done');
      resolve(answer);
    } catch (err) {
      if (err?.name === 'AbortError') return;
      replace(result, errorBox(err, request.verb === 'approve' ? 'Approving' : 'Rejecting'));
      confirm.disabled = false;
    }
  });

  const actOn = (verb, n) => `${verb === 'approve' ? 'Approve' : 'Reject'} ${n}`;

  async function loadPreview(request) {
    let answer;
    try {
      answer = await api(`/decisions/${request.verb}`, { method: 'POST', body: { ...request.body, preview: true }, signal: request.signal });
    } catch (err) {
      if (err?.name === 'AbortError') return;
      replace(preview, errorBox(err, 'The preview'));
      return;
    }
    if (pending?.request !== request) return;
    const n = answer[request.verb === 'approve' ? 'approved' : 'rejected'] ?? 0;
    const skipped = [
      answer.expired ? `${answer.expired} expired` : null,
      answer.dryRun ? `${answer.dryRun} from dry runs` : null,
      answer.notProposed ? `${answer.notProposed} no longer proposed` : null,
    ].filter(Boolean);
    const sample = answer.sample ?? [];
    replace(preview,
      h('p', { class: 'decide-count' }, h('strong', { text: `${n} decision(s) will be ${request.verb === 'approve' ? 'approved' : 'rejected'}` }),
        ` of ${answer.matched} matched${skipped.length ? ` (${skipped.join(', ')}: left as they are)` : ''}.`),
      sample.length ? h('details', { class: 'decide-sample', open: sample.length <= 10 },
        h('summary', { text: sample.length < n ? `The first ${sample.length} of them` : 'Which ones' }),
        h('ul', {}, sample.map((d) => h('li', {},
          h('a', { href: route('decisions', d.id), text: `#${d.id}` }), ' ', podName(d), ' on ', d.node,
          h('span', { class: 'muted', text: ` (${d.plugin})` }))))) : null);
    confirm.textContent = actOn(request.verb, n);
    confirm.disabled = n === 0;
    if (request.verb === 'approve' && n > 0) await loadWhatIf(request, answer);
  }

  async function loadWhatIf(request, answer) {
    replace(whatIf, h('h3', { text: 'What if these are approved' }),
      h('p', { class: 'state loading', role: 'status' }, h('span', { class: 'spinner', 'aria-hidden': 'true' }), 'Simulating the moves…'));
    const parts = [];
    for (const target of request.whatIf(answer)) {
      try {
        const r = await api(`/clusters/${encodeURIComponent(target.cluster)}/what-if`, { method: 'POST', body: target.body, signal: request.signal });
        if ((r.moves ?? []).length) parts.push(renderWhatIf(r, { compact: true }));
      } catch (err) {
        if (err?.name === 'AbortError') return;
        parts.push(whatIfError(err));
      }
      if (pending?.request !== request) return;
    }
    replace(whatIf, h('h3', { text: 'What if these are approved' }), parts.length ? parts : h('p', { class: 'muted', text: 'No move to simulate.' }));
  }

  return {
    element: dialog,
    ask(request) {
      title.textContent = request.heading;
      replace(what, request.description ? h('p', { text: request.description }) : null);
      replace(preview, h('p', { class: 'state loading', role: 'status' }, h('span', { class: 'spinner', 'aria-hidden': 'true' }), 'Counting what this would do…'));
      replace(whatIf);
      replace(result);
      label.textContent = request.verb === 'reject' ? 'Comment: why keep them where they are' : 'Comment (optional)';
      textarea.value = '';
      confirm.textContent = request.verb === 'approve' ? 'Approve' : 'Reject';
      confirm.className = request.verb === 'reject' ? 'danger' : '';
      confirm.disabled = true;
      dialog.returnValue = '';
      dialog.showModal();
      const promise = new Promise((resolve) => { pending = { request, resolve }; });
      loadPreview(request).then(() => {
        if (pending?.request === request && dialog.open) (request.verb === 'approve' && !confirm.disabled ? confirm : textarea).focus();
      });
      if (request.verb === 'reject') textarea.focus();
      return promise;
    },
  };
}

/** What an approve/reject answer did, in one sentence. */
export function outcomeText(verb, answer) {
  const n = answer[verb === 'approve' ? 'approved' : 'rejected'] ?? 0;
  const skipped = [
    answer.expired ? `${answer.expired} had expired` : null,
    answer.dryRun ? `${answer.dryRun} came from dry runs` : null,
    answer.notProposed ? `${answer.notProposed} were no longer proposed` : null,
  ].filter(Boolean);
  return `${verb === 'approve' ? 'Approved' : 'Rejected'} ${n} of ${answer.matched} decision(s)${skipped.length ? ` (${skipped.join(', ')})` : ''}.`;
}

/** The status cell: badge, why, and for a superseded one the link to the newer decision. */
export function statusCell(d) {
  return [
    badge(d.status),
    d.dryRun ? [' ', badge('dry run')] : null,
    d.supersededBy ? h('span', { class: 'sub' }, 'by ', h('a', { href: route('decisions', d.supersededBy), text: `#${d.supersededBy}` })) : null,
    d.statusReason ? h('span', { class: 'sub', text: d.statusReason }) : null,
  ];
}

export async function list(ctx) {
  ctx.setTitle('Decisions');
  const filters = Object.fromEntries(FILTERS.map((k) => [k, ctx.query.get(k) ?? '']));
  const sort = ctx.query.get('sort') ?? 'newest';
  const canDecide = allowed(ctx.me, 'approve');
  const filterHolder = h('div', {}, loading('filters'));
  const actionResult = h('div', { class: 'result', 'aria-live': 'polite' });
  const listHolder = h('div', {}, loading('decisions'));
  const dialog = decideDialog();
  append(ctx.main, h('h1', { text: 'Decisions' }),
    h('p', { class: 'lead', text: 'Every pod move a run proposed, with the policy that proposed it and why. Approved decisions become pod migrations.' }),
    roleNotice(ctx.me, 'approve', 'The decisions and their reasons are shown; approving and rejecting are not offered.'),
    filterHolder, actionResult, listHolder, dialog.element);

  // Filter choices: clusters, profiles and plugins as the server knows them.
  const optional = (promise) => promise.catch((err) => {
    if (err?.name === 'AbortError') throw err;
    return { items: [] };
  });
  const [clusters, profiles, policies, run] = await Promise.all([
    optional(api('/clusters', { signal: ctx.signal })),
    optional(api('/profiles', { signal: ctx.signal })),
    optional(api('/policies', { signal: ctx.signal })),
    /^\d+$/.test(filters.run) ? api(`/runs/${filters.run}`, { signal: ctx.signal }).catch((err) => {
      if (err?.name === 'AbortError') throw err;
      return null;
    }) : null,
  ]);
  if (run?.dryRun) {
    append(actionResult, h('p', { class: 'notice', text: `Run #${run.id} was a dry run: its decisions are recorded for review but can never be approved or executed.` }));
  }
  const choices = (items, current) => [...new Set([...items, current].filter(Boolean))].sort();
  const select = (id, name, anyText, values, current, labels = null) => h('select', { id, name },
    h('option', { value: '', text: anyText }),
    values.map((v) => h('option', { value: v, text: labels?.get(v) ?? v, selected: v === current })));
  const fields = {
    cluster: select('filter-cluster', 'cluster', 'Any cluster', choices(clusters.items.map((c) => c.name), filters.cluster), filters.cluster),
    profile: select('filter-profile', 'profile', 'Any profile', choices(profiles.items.map((p) => p.name), filters.profile), filters.profile),
    run: h('input', { id: 'filter-run', name: 'run', type: 'number', min: 1, inputmode: 'numeric', value: filters.run }),
    namespace: h('input', { id: 'filter-namespace', name: 'namespace', type: 'text', value: filters.namespace, autocomplete: 'off', spellcheck: 'false' }),
    node: h('input', { id: 'filter-node', name: 'node', type: 'text', value: filters.node, autocomplete: 'off', spellcheck: 'false' }),
    plugin: select('filter-plugin', 'plugin', 'Any plugin', choices(policies.items.map((p) => p.name), filters.plugin), filters.plugin),
    status: select('filter-status', 'status', 'Any status', STATUSES, filters.status),
    pod: h('input', { id: 'filter-pod', name: 'pod', type: 'search', value: filters.pod, autocomplete: 'off', spellcheck: 'false', placeholder: 'namespace/name contains…' }),
  };
  const sortSelect = h('select', { id: 'filter-sort', name: 'sort' },
    SORTS.map(([v, text]) => h('option', { value: v, text, selected: v === sort })));
  const labels = { cluster: 'Cluster', profile: 'Profile', run: 'Run', namespace: 'Namespace', node: 'Node', plugin: 'Plugin', status: 'Status', pod: 'Pod search' };
  const filterForm = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter decisions' },
    FILTERS.map((k) => h('div', { class: `field field-${k}` }, h('label', { for: fields[k].id, text: labels[k] }), fields[k])),
    h('div', { class: 'field' }, h('label', { for: 'filter-sort', text: 'Sort' }), sortSelect),
    h('div', { class: 'actions' },
      h('button', { type: 'submit', text: 'Apply filters' }),
      h('a', { href: '#/decisions', class: 'button secondary', text: 'Clear' })));
  filterForm.addEventListener('submit', (event) => {
    event.preventDefault();
    const query = Object.fromEntries(FILTERS.map((k) => [k, fields[k].value.trim()]));
    if (sortSelect.value !== 'newest') query.sort = sortSelect.value;
    location.hash = routeWithQuery('#/decisions', query);
  });
  // On a phone the filters fold away (open when some are set), so the queue comes first.
  const active = FILTERS.filter((k) => filters[k]).length;
  replace(filterHolder, h('details', { class: 'filter-box', open: active > 0 || window.innerWidth > 600 },
    h('summary', { text: `Filters and sort${active ? ` (${active} set)` : ''}` }), filterForm));

  // The table.
  const rows = new Map(); // id → { tr, decision, checkbox }
  const tbody = h('tbody');
  const selectAll = h('input', { type: 'checkbox', id: 'select-all', 'aria-label': 'Select every actionable decision shown' });
  const approveSelected = h('button', { type: 'button', id: 'approve-selected', disabled: true, text: 'Approve selected (0)' });
  const rejectSelected = h('button', { type: 'button', id: 'reject-selected', class: 'danger', disabled: true, text: 'Reject selected (0)' });
  const allMatching = h('button', { type: 'button', class: 'link-button', id: 'select-matching', hidden: true });
  const approveMatching = h('button', { type: 'button', class: 'secondary', id: 'approve-matching', text: 'Approve all matching…' });
  const rejectMatching = h('button', { type: 'button', class: 'secondary', id: 'reject-matching', text: 'Reject all matching…' });
  const more = h('button', { type: 'button', class: 'secondary', text: 'Load more', hidden: true });
  const count = h('p', { class: 'count', id: 'decisions-count', 'aria-live': 'polite' });
  let next = null;
  let total = 0;
  let matchingMode = false; // "all N matching the filter" selected, beyond the loaded rows
  let focusedId = null;

  const actionFilter = () => Object.fromEntries(ACTION_FILTERS.filter((k) => filters[k]).map((k) => [k, k === 'run' ? Number(filters[k]) : filters[k]]));
  const hasActionFilter = () => Object.keys(actionFilter()).length > 0;
  const selected = () => [...rows.values()].filter((r) => r.checkbox?.checked).map((r) => r.decision);

  const refreshSelection = () => {
    const n = matchingMode ? total : selected().length;
    const label = matchingMode ? `all ${total} matching` : String(n);
    approveSelected.textContent = `Approve selected (${label})`;
    rejectSelected.textContent = `Reject selected (${label})`;
    approveSelected.disabled = n === 0;
    rejectSelected.disabled = n === 0;
    const selectable = [...rows.values()].filter((r) => r.checkbox);
    selectAll.checked = selectable.length > 0 && selectable.every((r) => r.checkbox.checked);
    selectAll.indeterminate = n > 0 && !selectAll.checked && !matchingMode;
    selectAll.disabled = selectable.length === 0;
    const offerMatching = selectAll.checked && total > selectable.length && hasActionFilter();
    allMatching.hidden = !(offerMatching || matchingMode);
    allMatching.textContent = matchingMode
      ? `All ${total} decisions matching the filter are selected. Select only the ${selectable.length} shown`
      : `Select all ${total} decisions matching the filter`;
  };

  const report = (node) => replace(actionResult, node);

  const clustersOf = (decisions) => [...new Set(decisions.map((d) => d.cluster))];
  /** What-if targets: one per cluster, with the ids of that cluster or the filter. */
  const byIds = (decisions) => () => clustersOf(decisions).map((cluster) => ({
    cluster, body: whatIfBody({ ids: decisions.filter((d) => d.cluster === cluster).map((d) => d.id) }),
  }));
  const byFilter = () => (answer) => {
    const names = filters.cluster ? [filters.cluster] : clusters.items.map((c) => c.name);
    const acted = answer.approved ?? answer.rejected ?? 0;
    // Exactly the decisions that would be approved: the sample when it holds all of them, or
    // the preview's ids when the filter names the cluster.
    if ((answer.sample ?? []).length === acted && acted > 0) return byIds(answer.sample)();
    if (filters.cluster && Array.isArray(answer.ids) && answer.ids.length === acted) {
      return [{ cluster: filters.cluster, body: whatIfBody({ ids: answer.ids }) }];
    }
    return names.map((cluster) => ({ cluster, body: whatIfBody({ filter: { ...actionFilter(), status: 'proposed' } }) }));
  };

  async function decide(verb, target) {
    let request;
    const noun = verb === 'approve' ? 'Approve' : 'Reject';
    if (target === 'matching') {
      request = { heading: `${noun} all decisions matching the filter`, body: actionFilter(), whatIf: byFilter(),
        description: `Filter: ${Object.entries(actionFilter()).map(([k, v]) => `${k}=${v}`).join(', ')}. Only proposed decisions (not from dry runs, not expired) are acted on.` };
    } else if (target.length === 1) {
      const d = target[0];
      request = { heading: `${noun} decision #${d.id}`, body: { ids: [d.id] }, whatIf: byIds(target),
        description: verb === 'approve' ? `Move ${podName(d)} off ${d.node} (${d.plugin}).` : `Keep ${podName(d)} on ${d.node}. Say why, for the audit log.` };
    } else {
      request = { heading: `${noun} ${target.length} selected decisions`, body: { ids: target.map((d) => d.id) }, whatIf: byIds(target) };
    }
    request.verb = verb;
    request.signal = ctx.signal;
    const answer = await dialog.ask(request);
    if (!answer) return;
    const message = target !== 'matching' && target.length === 1
      ? `Decision #${target[0].id} (${podName(target[0])}) ${answer[verb === 'approve' ? 'approved' : 'rejected'] ? (verb === 'approve' ? 'approved' : 'rejected') : 'not changed'}. ${outcomeText(verb, answer)}`
      : outcomeText(verb, answer);
    report(h('p', { class: 'ok', text: message }));
    matchingMode = false;
    await refresh().catch((err) => {
      if (err?.name !== 'AbortError') report(errorBox(err, 'Refreshing'));
    });
  }

  function buildRow(d) {
    const name = podName(d);
    const canAct = actionable(d) && canDecide;
    const checkbox = canAct ? h('input', {
      type: 'checkbox', class: 'select-row', 'aria-label': `Select decision #${d.id} (${name})`,
      onchange: () => { matchingMode = false; refreshSelection(); },
    }) : null;
    let actions = null;
    if (canAct) {
      actions = [
        h('button', { type: 'button', class: 'small', 'aria-label': `Approve decision #${d.id} (${name})`, text: 'Approve', onclick: () => decide('approve', [d]) }),
        h('button', { type: 'button', class: 'small danger', 'aria-label': `Reject decision #${d.id} (${name})`, text: 'Reject', onclick: () => decide('reject', [d]) }),
      ];
    } else if (d.supersededBy) {
      actions = h('a', { href: route('decisions', d.supersededBy), text: `Newer: #${d.supersededBy}` });
    } else if (['approved', 'executing', 'succeeded', 'failed'].includes(d.status)) {
      actions = h('a', { href: routeWithQuery('#/pod-migrations', { decision: d.id }), text: 'Pod migration' });
    } else if (d.status === 'proposed' && d.dryRun) {
      actions = h('span', { class: 'muted', text: 'dry run: never approvable' });
    }
    const tr = h('tr', { dataset: { id: d.id, status: d.status }, tabindex: '-1' },
      h('td', { class: 'select', 'data-label': 'Select' }, checkbox),
      h('td', { class: 'num id', 'data-label': 'Decision' }, h('a', { href: route('decisions', d.id), text: `#${d.id}` }),
        h('span', { class: 'sub' }, h('a', { href: routeWithQuery('#/decisions', { run: d.run }), title: `Decisions of run #${d.run}`, text: `run #${d.run}` }))),
      h('th', { scope: 'row', class: 'pod', 'data-label': 'Pod' }, h('span', { class: 'ns', text: `${d.pod.namespace}/` }), d.pod.name,
        h('span', { class: 'sub' }, 'on ', h('a', { href: route('clusters', d.cluster, 'nodes', d.node), text: d.node }), ` · ${d.cluster}`)),
      h('td', { class: 'status', 'data-label': 'Status' }, statusCell(d)),
      h('td', { class: 'plugin', 'data-label': 'Plugin' }, d.plugin, h('span', { class: 'sub', text: `${d.profile} · ${d.pluginSet}` })),
      h('td', { class: 'reason', 'data-label': 'Reason' }, h('span', { class: 'clamp', title: d.reason, text: d.reason })),
      h('td', { class: 'row-actions', 'data-label': 'Actions' }, actions));
    tr.addEventListener('focusin', () => { focusedId = d.id; });
    return { tr, decision: d, checkbox };
  }

  const query = (limit, cursor) => ({ ...filters, sort: sort === 'newest' ? '' : sort, limit, cursor });
  const showCount = () => {
    count.textContent = `Showing ${rows.size} of ${total} decision(s).`;
    count.dataset.shown = rows.size;
    count.dataset.total = total;
  };

  const load = async () => {
    more.disabled = true;
    const page = await api('/decisions', { query: query(PAGE, next), signal: ctx.signal });
    for (const d of page.items) {
      if (rows.has(d.id)) continue;
      const entry = buildRow(d);
      rows.set(d.id, entry);
      tbody.appendChild(entry.tr);
    }
    next = page.next ?? null;
    total = page.total ?? rows.size;
    more.hidden = !next;
    more.disabled = false;
    showCount();
    refreshSelection();
  };

  /** Fetch what is shown again (as many rows as are loaded), keeping selection and focus. */
  const refresh = async () => {
    const keep = new Set(selected().map((d) => d.id));
    const limit = Math.min(1000, Math.max(PAGE, rows.size));
    const page = await api('/decisions', { query: query(limit, null), signal: ctx.signal });
    const hadFocus = tbody.contains(document.activeElement) ? focusedId : null;
    rows.clear();
    const fresh = page.items.map((d) => {
      const entry = buildRow(d);
      if (entry.checkbox && keep.has(d.id)) entry.checkbox.checked = true;
      rows.set(d.id, entry);
      return entry.tr;
    });
    tbody.replaceChildren(...fresh);
    next = page.next ?? null;
    total = page.total ?? rows.size;
    more.hidden = !next;
    showCount();
    refreshSelection();
    if (hadFocus && rows.has(hadFocus)) rows.get(hadFocus).tr.focus({ preventScroll: true });
    if (rows.size === 0) drawEmpty();
    else if (!listHolder.contains(tbody)) drawTable();
  };

  selectAll.addEventListener('change', () => {
    matchingMode = false;
    for (const r of rows.values()) if (r.checkbox) r.checkbox.checked = selectAll.checked;
    refreshSelection();
  });
  allMatching.addEventListener('click', () => {
    matchingMode = !matchingMode;
    refreshSelection();
  });
  approveSelected.addEventListener('click', () => decide('approve', matchingMode ? 'matching' : selected()));
  rejectSelected.addEventListener('click', () => decide('reject', matchingMode ? 'matching' : selected()));
  approveMatching.addEventListener('click', () => decide('approve', 'matching'));
  rejectMatching.addEventListener('click', () => decide('reject', 'matching'));
  more.addEventListener('click', () => load().catch((err) => {
    if (err?.name !== 'AbortError') report(errorBox(err, 'Loading more decisions'));
  }));

  // Keyboard: j/k move between rows, x selects, a/r decide, o opens.
  const ordered = () => [...tbody.querySelectorAll('tr[data-id]')];
  const onKey = (event) => {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey) return;
    const target = event.target;
    if (target instanceof HTMLElement && (target.closest('input:not([type="checkbox"]), select, textarea, dialog') || target.isContentEditable)) return;
    if (document.querySelector('dialog[open]')) return;
    const trs = ordered();
    const index = trs.findIndex((tr) => Number(tr.dataset.id) === focusedId);
    const current = index >= 0 ? rows.get(focusedId) : null;
    const key = event.key;
    if (key === 'j' || key === 'k') {
      if (!trs.length) return;
      const nextIndex = index < 0 ? 0 : Math.max(0, Math.min(trs.length - 1, index + (key === 'j' ? 1 : -1)));
      trs[nextIndex].focus();
      trs[nextIndex].scrollIntoView({ block: 'nearest' });
    } else if (key === 'x' && current?.checkbox) {
      current.checkbox.checked = !current.checkbox.checked;
      matchingMode = false;
      refreshSelection();
    } else if ((key === 'a' || key === 'r') && canDecide) {
      const chosen = matchingMode ? 'matching' : selected();
      const verb = key === 'a' ? 'approve' : 'reject';
      if (chosen === 'matching' || chosen.length) decide(verb, chosen);
      else if (current && actionable(current.decision)) decide(verb, [current.decision]);
      else return;
    } else if (key === 'o' && current) {
      location.hash = route('decisions', current.decision.id);
    } else if (key === '/') {
      fields.pod.focus();
      fields.pod.select();
    } else {
      return;
    }
    event.preventDefault();
  };
  document.addEventListener('keydown', onKey);
  ctx.onLeave(() => document.removeEventListener('keydown', onKey));

  const drawEmpty = () => {
    const anyFilter = FILTERS.some((k) => filters[k]);
    replace(listHolder, count, empty(anyFilter ? 'No decision matches these filters.'
      : 'No decisions yet. Start a run: its proposed pod moves appear here.',
    anyFilter ? null : h('a', { href: '#/runs', class: 'button', text: 'Start a run' })));
  };
  const drawTable = () => {
    const canFilterAct = canDecide && hasActionFilter();
    replace(listHolder,
      h('div', { class: 'toolbar' },
        canDecide ? [approveSelected, rejectSelected] : null,
        canFilterAct ? [approveMatching, rejectMatching] : null,
        h('button', { type: 'button', class: 'secondary', text: 'Refresh', onclick: () => refresh().catch((err) => {
          if (err?.name !== 'AbortError') report(errorBox(err, 'Refreshing'));
        }) }),
        count),
      canDecide ? allMatching : null,
      h('div', { class: 'table-wrap sticky' }, h('table', { class: 'decisions cards' },
        h('caption', { class: 'visually-hidden', text: 'Decisions' }),
        h('thead', {}, h('tr', {},
          h('th', { scope: 'col', class: 'select' }, canDecide ? selectAll : h('span', { class: 'visually-hidden', text: 'Select' })),
          ['Decision', 'Pod and node', 'Status', 'Plugin', 'Reason', 'Actions'].map((c) => h('th', { scope: 'col', text: c })))),
        tbody)),
      h('div', { class: 'toolbar' }, more),
      h('details', { class: 'shortcuts' },
        h('summary', { text: 'Keyboard shortcuts' }),
        h('dl', {}, SHORTCUTS.map(([k, v]) => [h('dt', {}, h('kbd', { text: k })), h('dd', { text: v })])),
        canDecide ? null : h('p', { class: 'muted', text: whyNot(ctx.me, 'approve') })));
  };

  // Live: decisions change status, runs add new ones.
  const liveRefresh = debounce(() => refresh().catch((err) => {
    if (err?.name !== 'AbortError') report(errorBox(err, 'Refreshing'));
  }), 400);
  const relevant = (data, meta) => meta?.reset || !filters.cluster || !data?.cluster || data.cluster === filters.cluster;
  ctx.live.on('decisions', (data, meta) => { if (relevant(data, meta)) liveRefresh(); });
  ctx.live.on('run', (data, meta) => {
    if (relevant(data, meta) && (meta?.reset || data.status === 'succeeded' || data.status === 'failed')) liveRefresh();
  });
  ctx.onLeave(() => liveRefresh.cancel());

  await load();
  if (rows.size === 0 && !next) drawEmpty();
  else drawTable();
}
