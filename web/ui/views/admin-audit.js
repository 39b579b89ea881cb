// The audit log: who did what to which object, newest first, filtered by actor, action, object
// kind and id, and a start time (what GET /audit supports; it has no end time), paged with its
// cursor. The filters live in the URL so a filtered view can be shared.
//
// Owns: the filters form and the cursor stack (Newer goes back through the cursors seen).
// Must not: filter or sort on the client: every filter is the API's.

import { api } from '../api.js';
import {
  append, empty, errorBox, h, loading, replace, routeWithQuery, table, time,
} from '../dom.js';
import { adminNav } from './admin-kit.js';

const ACTIONS = [
  'policy.upload', 'policy.delete', 'profile.put', 'profile.delete', 'profile.auto-approve', 'cluster.snapshot', 'cluster.delete',
  'run.create', 'token.create', 'token.delete', 'schedule.create', 'schedule.update', 'schedule.delete',
  'decision.approve', 'decision.reject', 'pod-migration.abort', 'arbitration.put', 'arbitration.delete', 'retention.put',
];
const KINDS = ['policy', 'profile', 'cluster', 'run', 'token', 'schedule', 'decision', 'pod-migration', 'arbitration', 'retention'];
const PAGE = 50;
const MAX_PAGE = 1000;

/** `<input type=datetime-local>` value (local time) as RFC 3339 UTC, or ''. */
function toRfc3339(local) {
  if (!local) return '';
  const d = new Date(local);
  return Number.isNaN(d.getTime()) ? '' : d.toISOString();
}

function toLocalInput(rfc) {
  if (!rfc) return '';
  const d = new Date(rfc);
  if (Number.isNaN(d.getTime())) return '';
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

function objectLink(o) {
  const id = o.id ?? '';
  const hrefs = {
    decision: `#/decisions/${encodeURIComponent(id)}`,
    'pod-migration': `#/pod-migrations/${encodeURIComponent(id)}`,
    run: `#/runs/${encodeURIComponent(id)}`,
    profile: `#/profiles/${encodeURIComponent(id)}`,
    cluster: `#/clusters/${encodeURIComponent(id)}`,
  };
  const text = id ? `${o.kind} ${id}` : o.kind;
  return hrefs[o.kind] && id ? h('a', { href: hrefs[o.kind], text }) : h('span', { text });
}

export async function page(ctx) {
  ctx.setTitle('Audit log');
  const q = (k) => ctx.query.get(k) ?? '';
  const filters = { actor: q('actor'), action: q('action'), kind: q('kind'), object: q('object'), since: q('since') };
  // `?limit=` (1–1000) changes the page size; the filters form keeps it.
  const size = Math.min(MAX_PAGE, Math.max(1, Number(q('limit')) || PAGE));
  const field = (id, label, control, help) => h('div', { class: 'field' }, h('label', { for: id, text: label }), control,
    help ? h('p', { class: 'help', text: help }) : null);
  const actor = h('input', { id: 'audit-actor', value: filters.actor });
  // Free text with suggestions: servers newer than this page may record more actions.
  const action = h('input', { id: 'audit-action', value: filters.action, list: 'audit-actions', placeholder: 'any' });
  const actions = h('datalist', { id: 'audit-actions' }, ACTIONS.map((a) => h('option', { value: a })));
  const kind = h('select', { id: 'audit-kind' }, h('option', { value: '', text: 'any' }),
    KINDS.map((k) => h('option', { value: k, text: k, selected: k === filters.kind })));
  const object = h('input', { id: 'audit-object', value: filters.object });
  const since = h('input', { id: 'audit-since', type: 'datetime-local', value: toLocalInput(filters.since) });
  const form = h('form', { class: 'filters', 'aria-label': 'Audit log filters' },
    field('audit-actor', 'Actor (token name)', actor),
    field('audit-action', 'Action', [action, actions]),
    field('audit-kind', 'Object kind', kind),
    field('audit-object', 'Object id or name', object),
    field('audit-since', 'From (your local time)', since),
    h('div', { class: 'actions' },
      h('button', { type: 'submit', text: 'Apply filters' }),
      h('a', { class: 'button secondary', href: '#/admin/audit', text: 'Clear' })));
  const body = h('div', {}, loading('the audit log'));
  append(ctx.main, adminNav('admin/audit'), h('h1', { text: 'Audit log' }),
    h('p', { class: 'lead', text: 'Every change, by whom, newest first. The API filters from a start time; it has no end time, so page back (Older) to reach earlier entries.' }),
    form, body);
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    location.hash = routeWithQuery('#/admin/audit', {
      actor: actor.value.trim(), action: action.value, kind: kind.value, object: object.value.trim(), since: toRfc3339(since.value),
      limit: size === PAGE ? '' : size,
    });
  });

  // Cursors of the pages seen, so "Newer" goes back without the API supporting it.
  const cursors = [null];
  let index = 0;
  const draw = async () => {
    replace(body, loading('the audit log'));
    let data;
    try {
      data = await api('/audit', {
        query: { ...filters, limit: size, cursor: cursors[index] }, signal: ctx.signal,
      });
    } catch (err) {
      if (err?.name === 'AbortError') return;
      replace(body, errorBox(err, 'Reading the audit log'));
      return;
    }
    if (data.next && cursors.length === index + 1) cursors.push(data.next);
    if (!data.items.length) {
      replace(body, empty(index === 0 ? 'No entries match these filters.' : 'No older entries.'));
      return;
    }
    const go = (to) => () => { index = to; draw().then(() => body.querySelector('table')?.focus?.()); };
    replace(body, table({
      caption: `Audit entries ${index * size + 1}–${index * size + data.items.length}`,
      className: 'audit cards',
      columns: ['Time', 'Actor', 'Action', 'Object', 'Detail'],
      rows: data.items.map((e) => h('tr', { dataset: { id: String(e.id) } },
        h('td', { 'data-label': 'Time' }, time(e.time)),
        h('td', { 'data-label': 'Actor' }, e.actor.name, h('span', { class: 'sub', text: e.actor.role })),
        h('th', { scope: 'row', 'data-label': 'Action' }, h('code', { text: e.action })),
        h('td', { 'data-label': 'Object' }, objectLink(e.object)),
        h('td', { 'data-label': 'Detail', class: 'description' }, e.detail === null || e.detail === undefined ? '—'
          : typeof e.detail?.comment === 'string' && Object.keys(e.detail).length === 1 ? e.detail.comment
            : h('details', {}, h('summary', { text: Object.keys(e.detail).slice(0, 4).join(', ') || 'detail' }),
              h('pre', { text: JSON.stringify(e.detail, null, 2) }))))),
    }), h('div', { class: 'pager' },
      h('button', { type: 'button', class: 'secondary', text: 'Newer', disabled: index === 0, onclick: go(index - 1) }),
      h('span', { class: 'muted', text: ` Page ${index + 1} ` }),
      h('button', { type: 'button', class: 'secondary', text: 'Older', disabled: !data.next, onclick: go(index + 1) })));
  };
  await draw();
}
