// Pod migrations: the list (optionally of one decision or phase), one migration with its
// events, and abort.

import { api } from '../api.js';
import {
  append, badge, empty, errorBox, facts, h, loading, prepend, replace, route, routeWithQuery, table, time,
} from '../dom.js';

const PHASES = ['Pending', 'Running', 'Succeeded', 'Failed', 'Aborted'];
const ACTIVE = new Set(['Pending', 'Running']);
const POLL_MS = 2000;

function podOf(m) {
  return m.pod ? `${m.pod.namespace}/${m.pod.name}` : null;
}

function nodes(m) {
  return h('span', { class: 'nodes-move' }, m.sourceNode ?? '—', h('span', { 'aria-label': ' to ', text: ' → ' }), m.targetNode ?? '—');
}

export async function list(ctx) {
  ctx.setTitle('Pod migrations');
  const filters = { decision: ctx.query.get('decision') ?? '', phase: ctx.query.get('phase') ?? '' };
  const listHolder = h('div', {}, loading('pod migrations'));
  const decisionInput = h('input', { id: 'filter-decision', type: 'number', min: 1, inputmode: 'numeric', value: filters.decision });
  const phaseSelect = h('select', { id: 'filter-phase' },
    h('option', { value: '', text: 'Any phase' }),
    PHASES.map((p) => h('option', { value: p, text: p, selected: p === filters.phase })));
  const form = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter pod migrations' },
    h('div', { class: 'field' }, h('label', { for: 'filter-decision', text: 'Decision' }), decisionInput),
    h('div', { class: 'field' }, h('label', { for: 'filter-phase', text: 'Phase' }), phaseSelect),
    h('div', { class: 'actions' },
      h('button', { type: 'submit', text: 'Apply filters' }),
      h('a', { href: '#/pod-migrations', class: 'button secondary', text: 'Clear' })));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    location.hash = routeWithQuery('#/pod-migrations', { decision: decisionInput.value.trim(), phase: phaseSelect.value });
  });
  const refresh = h('button', { type: 'button', class: 'secondary', text: 'Refresh' });
  append(ctx.main, h('h1', { text: 'Pod migrations' }),
    h('p', { class: 'lead', text: 'Each approved decision is carried out as a pod migration: reserve room on a target node, evict, and confirm the replacement landed.' }),
    form, listHolder);

  const draw = async () => {
    const data = await api('/pod-migrations', { query: filters, signal: ctx.signal });
    const items = data.items.filter((m) => !filters.phase || m.phase === filters.phase);
    if (items.length === 0) {
      replace(listHolder, empty(filters.decision || filters.phase
        ? 'No pod migration matches these filters.'
        : 'No pod migrations yet. Approve a decision and it is carried out here.',
      h('a', { href: routeWithQuery('#/decisions', { status: 'proposed' }), class: 'button', text: 'Review proposed decisions' })));
      return;
    }
    replace(listHolder, 
      h('div', { class: 'toolbar' }, refresh, h('span', { class: 'muted', text: `${items.length} pod migration(s)${data.next ? '; showing the first page' : ''}.` })),
      table({
        caption: 'Pod migrations',
        hiddenCaption: true,
        columns: ['Migration', 'Decision', 'Pod', 'Mode', 'Phase', 'Source → target', 'Reason', 'Updated'],
        rows: items.map((m) => h('tr', { dataset: { id: m.id, phase: m.phase } },
          h('th', { scope: 'row' }, h('a', { href: route('pod-migrations', m.id), text: `#${m.id}` })),
          h('td', { class: 'num', text: m.decision !== undefined && m.decision !== null ? `#${m.decision}` : '—' }),
          h('td', { class: 'pod', text: podOf(m) ?? '—' }),
          h('td', { text: m.mode ?? '—' }),
          h('td', {}, badge(m.phase), m.status ? h('span', { class: 'sub', text: m.status }) : null),
          h('td', { class: 'node' }, nodes(m)),
          h('td', { class: 'reason' }, m.reason ? h('strong', { text: m.reason }) : null, m.message ? [m.reason ? ': ' : '', m.message] : null),
          h('td', {}, time(m.updatedAt)))),
      }));
  };
  refresh.addEventListener('click', async () => {
    refresh.disabled = true;
    try {
      await draw();
      ctx.flash('Pod migrations refreshed.');
    } catch (err) {
      if (err?.name !== 'AbortError') prepend(listHolder, errorBox(err, 'Refreshing'));
    } finally {
      refresh.disabled = false;
    }
  });
  await draw();
}


export async function detail(ctx) {
  const id = ctx.params.id;
  ctx.setTitle(`Pod migration #${id}`);
  const summary = h('div', {}, loading('the pod migration'));
  const actionResult = h('div', { class: 'result', 'aria-live': 'polite' });
  const abortButton = h('button', { type: 'button', class: 'danger', text: 'Abort this pod migration', hidden: true });
  const eventsSection = h('section', { 'aria-labelledby': 'events-title' }, h('h2', { id: 'events-title', text: 'Events' }));
  const dialog = h('dialog', { class: 'dialog', 'aria-labelledby': 'abort-title' },
    h('form', { method: 'dialog' },
      h('h2', { id: 'abort-title', text: `Abort pod migration #${id}?` }),
      h('p', { text: 'The reservation is released. A pod that was already evicted is not brought back.' }),
      h('div', { class: 'actions' },
        h('button', { type: 'submit', value: 'cancel', class: 'secondary', text: 'Keep it running' }),
        h('button', { type: 'submit', value: 'abort', class: 'danger', text: 'Abort' }))));
  append(ctx.main, 
    h('p', { class: 'crumbs' }, h('a', { href: '#/pod-migrations', text: 'Pod migrations' }), ' / ', `#${id}`),
    h('h1', { text: `Pod migration #${id}` }), summary, h('div', { class: 'toolbar' }, abortButton), actionResult, eventsSection, dialog);

  let timer = null;
  const draw = (m) => {
    replace(summary, facts([
      ['Phase', badge(m.phase)],
      ['Status', m.status || '—'],
      ['Reason', m.reason || '—'],
      ['Message', m.message || '—'],
      ['Decision', `#${m.decision}`],
      ['Pod', podOf(m) ?? '—'],
      ['Cluster', h('a', { href: route('clusters', m.cluster), text: m.cluster })],
      ['Mode', m.mode ?? '—'],
      ['Source → target', nodes(m)],
      ['Reservation', m.reservation ? `${m.reservation}${m.reservationReleased ? ' (released)' : ''}` : '—'],
      ['Replacement pod', m.newPod ? `${m.newPod.name ?? m.newPod.uid}${m.newPod.node ? ` on ${m.newPod.node}` : ''}` : '—'],
      ['TTL', m.ttlSeconds ? `${m.ttlSeconds} s` : 'none'],
      ['Created', time(m.createdAt)],
      ['Started', time(m.startedAt)],
      ['Finished', time(m.finishedAt)],
    ]));
    abortButton.hidden = !ACTIVE.has(m.phase);
    const events = Array.isArray(m.events) ? m.events : [];
    const heading = eventsSection.firstChild;
    replace(eventsSection, heading, events.length === 0 ? empty('No events recorded yet.') : table({
      caption: 'Events, oldest first',
      hiddenCaption: true,
      columns: ['Time', 'Type', 'Reason', 'Message'],
      className: 'events',
      rows: events.map((e) => h('tr', {},
        h('td', {}, time(e.time)),
        h('td', {}, badge(e.type)),
        h('th', { scope: 'row', text: e.reason }),
        h('td', { text: e.message }))),
    }));
    clearTimeout(timer);
    if (ACTIVE.has(m.phase) && !ctx.signal.aborted) {
      timer = setTimeout(poll, POLL_MS);
    }
  };
  const fetchOne = () => api(`/pod-migrations/${encodeURIComponent(id)}`, { signal: ctx.signal });
  const poll = () => fetchOne().then(draw).catch((err) => {
    if (err?.name !== 'AbortError') replace(actionResult, errorBox(err, 'Refreshing'));
  });
  ctx.onLeave(() => clearTimeout(timer));

  abortButton.addEventListener('click', () => dialog.showModal());
  dialog.addEventListener('close', async () => {
    if (dialog.returnValue !== 'abort') return;
    abortButton.disabled = true;
    try {
      const m = await api(`/pod-migrations/${encodeURIComponent(id)}/abort`, { method: 'POST', body: {}, signal: ctx.signal });
      const message = `Pod migration #${id} aborted; phase is now ${m?.phase ?? 'updated'}.`;
      replace(actionResult, h('p', { class: 'ok', text: message }));
      draw(m && m.phase ? m : await fetchOne());
    } catch (err) {
      if (err?.name === 'AbortError') return;
      replace(actionResult, errorBox(err, 'Aborting'));
      poll();
    } finally {
      abortButton.disabled = false;
    }
  });

  draw(await fetchOne());
}
