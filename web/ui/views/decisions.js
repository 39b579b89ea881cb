// Decisions: proposed pod moves, filtered by run / status / plugin; approve, reject with a
// comment, and approve the selected ones in bulk.

import { api } from '../api.js';
import {
  append, badge, empty, errorBox, h, loading, replace, route, routeWithQuery,
} from '../dom.js';

const STATUSES = ['proposed', 'approved', 'rejected', 'expired', 'executing', 'succeeded', 'failed'];
const PAGE = 100;

/** The comment dialog (one per view): resolves with the comment, or null when cancelled. */
function commentDialog() {
  const title = h('h2', { id: 'comment-title' });
  const what = h('p', { id: 'comment-what' });
  const textarea = h('textarea', { id: 'comment-text', name: 'comment', rows: 3, maxlength: 2000 });
  const label = h('label', { for: 'comment-text' });
  const confirm = h('button', { type: 'submit', value: 'confirm' });
  const dialog = h('dialog', { class: 'dialog', 'aria-labelledby': 'comment-title', 'aria-describedby': 'comment-what' },
    h('form', { method: 'dialog' }, title, what, label, textarea,
      h('div', { class: 'actions' },
        h('button', { type: 'button', class: 'secondary', text: 'Cancel', onclick: () => dialog.close('cancel') }),
        confirm)));
  let resolve = null;
  dialog.addEventListener('close', () => {
    const r = resolve;
    resolve = null;
    if (r) r(dialog.returnValue === 'confirm' ? textarea.value.trim() : null);
  });
  return {
    element: dialog,
    ask({ heading, description, action, required, danger }) {
      title.textContent = heading;
      what.textContent = description;
      label.textContent = required ? 'Comment (required)' : 'Comment (optional)';
      textarea.required = Boolean(required);
      textarea.value = '';
      confirm.textContent = action;
      confirm.className = danger ? 'danger' : '';
      dialog.returnValue = '';
      dialog.showModal();
      textarea.focus();
      return new Promise((r) => { resolve = r; });
    },
  };
}

export async function list(ctx) {
  ctx.setTitle('Decisions');
  const filters = {
    run: ctx.query.get('run') ?? '',
    status: ctx.query.get('status') ?? '',
    plugin: ctx.query.get('plugin') ?? '',
  };
  const filterHolder = h('div', {}, loading('filters'));
  const actionResult = h('div', { class: 'result', 'aria-live': 'polite' });
  const listHolder = h('div', {}, loading('decisions'));
  const dialog = commentDialog();
  append(ctx.main, h('h1', { text: 'Decisions' }),
    h('p', { class: 'lead', text: 'Every pod move a run proposed, with the policy that proposed it and why. Approved decisions become pod migrations.' }),
    filterHolder, actionResult, listHolder, dialog.element);

  // Filters (plugins from the registered policies) and, for one run, whether it was a dry run.
  const [policies, run] = await Promise.all([
    api('/policies', { signal: ctx.signal }).catch((err) => {
      if (err?.name === 'AbortError') throw err;
      return { items: [] };
    }),
    /^\d+$/.test(filters.run) ? api(`/runs/${filters.run}`, { signal: ctx.signal }).catch((err) => {
      if (err?.name === 'AbortError') throw err;
      return null;
    }) : null,
  ]);
  if (run?.dryRun) {
    append(actionResult, h('p', { class: 'notice', text: `Run #${run.id} was a dry run: its decisions are recorded for review but can never be approved or executed.` }));
  }
  const pluginNames = [...new Set([...policies.items.map((p) => p.name), filters.plugin].filter(Boolean))].sort();
  const runInput = h('input', { id: 'filter-run', name: 'run', type: 'number', min: 1, inputmode: 'numeric', value: filters.run });
  const statusSelect = h('select', { id: 'filter-status', name: 'status' },
    h('option', { value: '', text: 'Any status' }),
    STATUSES.map((s) => h('option', { value: s, text: s, selected: s === filters.status })));
  const pluginSelect = h('select', { id: 'filter-plugin', name: 'plugin' },
    h('option', { value: '', text: 'Any plugin' }),
    pluginNames.map((p) => h('option', { value: p, text: p, selected: p === filters.plugin })));
  const filterForm = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter decisions' },
    h('div', { class: 'field' }, h('label', { for: 'filter-run', text: 'Run' }), runInput),
    h('div', { class: 'field' }, h('label', { for: 'filter-status', text: 'Status' }), statusSelect),
    h('div', { class: 'field' }, h('label', { for: 'filter-plugin', text: 'Plugin' }), pluginSelect),
    h('div', { class: 'actions' },
      h('button', { type: 'submit', text: 'Apply filters' }),
      h('a', { href: '#/decisions', class: 'button secondary', text: 'Clear' })));
  filterForm.addEventListener('submit', (event) => {
    event.preventDefault();
    location.hash = routeWithQuery('#/decisions', {
      run: runInput.value.trim(), status: statusSelect.value, plugin: pluginSelect.value,
    });
  });
  replace(filterHolder, filterForm);

  // The table.
  const rows = new Map(); // id → { tr, decision, checkbox }
  const tbody = h('tbody');
  const selectAll = h('input', { type: 'checkbox', id: 'select-all', 'aria-label': 'Select every proposed decision shown' });
  const bulkButton = h('button', { type: 'button', id: 'approve-selected', disabled: true, text: 'Approve selected (0)' });
  const more = h('button', { type: 'button', class: 'secondary', text: 'Load more decisions', hidden: true });
  const count = h('p', { class: 'muted' });
  let next = null;

  const selected = () => [...rows.values()].filter((r) => r.checkbox?.checked).map((r) => r.decision);
  const refreshSelection = () => {
    const n = selected().length;
    bulkButton.textContent = `Approve selected (${n})`;
    bulkButton.disabled = n === 0;
    const selectable = [...rows.values()].filter((r) => r.checkbox);
    selectAll.checked = selectable.length > 0 && selectable.every((r) => r.checkbox.checked);
    selectAll.indeterminate = n > 0 && !selectAll.checked;
    selectAll.disabled = selectable.length === 0;
  };

  const report = (node) => replace(actionResult, node);

  const decide = async (decision, verb) => {
    const podName = `${decision.pod.namespace}/${decision.pod.name}`;
    const comment = await dialog.ask(verb === 'approve'
      ? { heading: `Approve decision #${decision.id}`, description: `Move ${podName} off ${decision.node} (${decision.plugin}).`, action: 'Approve' }
      : { heading: `Reject decision #${decision.id}`, description: `Keep ${podName} on ${decision.node}. Say why, for the audit log.`, action: 'Reject', danger: true });
    if (comment === null) return;
    const entry = rows.get(decision.id);
    entry?.tr.setAttribute('aria-busy', 'true');
    try {
      const updated = await api(`/decisions/${decision.id}/${verb}`, {
        method: 'POST', body: comment ? { comment } : {}, signal: ctx.signal,
      });
      const message = `Decision #${decision.id} (${podName}) ${verb === 'approve' ? 'approved' : 'rejected'}; status is now ${updated.status}.`;
      report(h('p', { class: 'ok', text: message }));
      updateRow(updated);
    } catch (err) {
      if (err?.name === 'AbortError') return;
      report(errorBox(err, `${verb === 'approve' ? 'Approving' : 'Rejecting'} decision #${decision.id}`));
      // The decision may have changed under us (409): show its current state.
      if (err?.status === 409) {
        api(`/decisions/${decision.id}`, { signal: ctx.signal }).then(updateRow).catch(() => {});
      }
    } finally {
      rows.get(decision.id)?.tr.removeAttribute('aria-busy');
    }
  };

  function buildRow(d) {
    const podName = `${d.pod.namespace}/${d.pod.name}`;
    const proposed = d.status === 'proposed' && !(run?.dryRun && d.run === run.id);
    const checkbox = proposed ? h('input', {
      type: 'checkbox', class: 'select-row', 'aria-label': `Select decision #${d.id} (${podName})`, onchange: refreshSelection,
    }) : null;
    const actions = proposed ? [
      h('button', { type: 'button', class: 'small', 'aria-label': `Approve decision #${d.id} (${podName})`, text: 'Approve', onclick: () => decide(d, 'approve') }),
      h('button', { type: 'button', class: 'small danger', 'aria-label': `Reject decision #${d.id} (${podName})`, text: 'Reject', onclick: () => decide(d, 'reject') }),
    ] : (['approved', 'executing', 'succeeded', 'failed'].includes(d.status)
      ? h('a', { href: routeWithQuery('#/pod-migrations', { decision: d.id }), text: 'Pod migration' }) : null);
    const tr = h('tr', { dataset: { id: d.id, status: d.status } },
      h('td', { class: 'select' }, checkbox),
      h('td', { class: 'num' }, h('a', { href: routeWithQuery('#/decisions', { run: d.run }), title: `Decisions of run #${d.run}`, text: `#${d.id}` })),
      h('th', { scope: 'row', class: 'pod' }, h('span', { class: 'ns', text: `${d.pod.namespace}/` }), d.pod.name,
        h('span', { class: 'sub' }, 'on ', h('a', { href: route('clusters', d.cluster, 'nodes', d.node), text: d.node }))),
      h('td', { class: 'plugin' }, d.plugin, h('span', { class: 'sub', text: `plugin set ${d.pluginSet}` })),
      h('td', { class: 'reason', text: d.reason }),
      h('td', { class: 'status' }, badge(d.status), d.statusReason ? h('span', { class: 'sub', text: d.statusReason }) : null),
      h('td', { class: 'row-actions' }, actions));
    return { tr, decision: d, checkbox };
  }

  function updateRow(d) {
    const old = rows.get(d.id);
    const entry = buildRow(d);
    rows.set(d.id, entry);
    if (old) old.tr.replaceWith(entry.tr);
    refreshSelection();
  }

  const matches = (d) => !filters.plugin || d.plugin === filters.plugin;

  const load = async () => {
    more.disabled = true;
    const page = await api('/decisions', {
      query: { run: filters.run, status: filters.status, plugin: filters.plugin, limit: PAGE, cursor: next },
      signal: ctx.signal,
    });
    for (const d of page.items.filter(matches)) {
      const entry = buildRow(d);
      rows.set(d.id, entry);
      tbody.appendChild(entry.tr);
    }
    next = page.next ?? null;
    more.hidden = !next;
    more.disabled = false;
    count.textContent = `${rows.size} decision(s) shown${next ? '; more are available' : ''}.`;
    refreshSelection();
  };

  selectAll.addEventListener('change', () => {
    for (const r of rows.values()) if (r.checkbox) r.checkbox.checked = selectAll.checked;
    refreshSelection();
  });

  bulkButton.addEventListener('click', async () => {
    const chosen = selected();
    if (chosen.length === 0) return;
    bulkButton.disabled = true;
    report(h('p', { class: 'state loading', text: `Approving ${chosen.length} decision(s)…` }));
    try {
      const result = await api('/decisions/approve', {
        method: 'POST', body: { ids: chosen.map((d) => d.id) }, signal: ctx.signal,
      });
      // The answer counts what happened ({matched, approved, expired, dryRun, alreadyDecided,
      // ids}); show every chosen decision as it is now.
      const fresh = await Promise.all(chosen.map((d) => api(`/decisions/${d.id}`, { signal: ctx.signal })));
      fresh.forEach(updateRow);
      const approved = result?.approved ?? fresh.filter((d) => d.status !== 'proposed').length;
      const notes = [
        result?.expired ? `${result.expired} had expired` : null,
        result?.dryRun ? `${result.dryRun} came from a dry run` : null,
        result?.alreadyDecided ? `${result.alreadyDecided} had already been decided` : null,
      ].filter(Boolean);
      const message = `Approved ${approved} of ${chosen.length} selected decision(s)${notes.length ? ` (${notes.join(', ')})` : ''}.`;
      report(h('p', { class: 'ok', text: message }));
    } catch (err) {
      if (err?.name === 'AbortError') return;
      report(errorBox(err, 'Bulk approval'));
    } finally {
      refreshSelection();
    }
  });

  more.addEventListener('click', () => load().catch((err) => {
    if (err?.name !== 'AbortError') report(errorBox(err, 'Loading more decisions'));
  }));

  await load();
  if (rows.size === 0 && !next) {
    const anyFilter = filters.run || filters.status || filters.plugin;
    replace(listHolder, empty(anyFilter ? 'No decision matches these filters.'
      : 'No decisions yet. Start a run: its proposed pod moves appear here.',
    h('a', { href: '#/runs', class: 'button', text: 'Start a run' })));
    return;
  }
  replace(listHolder, 
    h('div', { class: 'toolbar' }, bulkButton,
      h('button', { type: 'button', class: 'secondary', text: 'Refresh', onclick: () => ctx.reload() }),
      h('span', { class: 'muted', text: 'Select proposed decisions with the checkboxes, then approve them together.' })),
    h('div', { class: 'table-wrap' }, h('table', { class: 'decisions' },
      h('caption', { class: 'visually-hidden', text: 'Decisions' }),
      h('thead', {}, h('tr', {},
        h('th', { scope: 'col', class: 'select' }, selectAll),
        ['ID', 'Pod and node', 'Plugin', 'Reason', 'Status', 'Actions'].map((c) => h('th', { scope: 'col', text: c })))),
      tbody)),
    count, more);
}
