// Pod migrations: the list (optionally of one decision or phase), refreshed live; one pod
// migration as a timeline of its steps (reservation or placeholder, eviction, replacement seen,
// cleanup) with durations in ms, its events, and abort with a comment.
//
// Owns: these two pages. Must not: give up on a network error (the page retries and says so).

import { api } from '../api.js';
import {
  append, badge, empty, errorBox, facts, h, loading, prepend, replace, route, routeWithQuery, table, time,
} from '../dom.js';
import { debounce } from '../live.js';
import { allowed, roleNotice } from '../session.js';

const PHASES = ['Pending', 'Running', 'Succeeded', 'Failed', 'Aborted'];
const ACTIVE = new Set(['Pending', 'Running']);
/** Polling while live updates are cut (and as a safety net), with backoff after errors. */
const POLL_MS = 2000;
const POLL_MAX_MS = 30_000;

function podOf(m) {
  return m.pod ? `${m.pod.namespace}/${m.pod.name}` : null;
}

function nodes(m) {
  return h('span', { class: 'nodes-move' }, m.sourceNode ?? '—', h('span', { 'aria-label': ' to ', text: ' → ' }), m.targetNode ?? '—');
}

export async function list(ctx) {
  ctx.setTitle('Pod migrations');
  const filters = {
    decision: ctx.query.get('decision') ?? '',
    phase: ctx.query.get('phase') ?? '',
    cluster: ctx.query.get('cluster') ?? '',
    node: ctx.query.get('node') ?? '',
  };
  const listHolder = h('div', {}, loading('pod migrations'));
  const decisionInput = h('input', { id: 'filter-decision', type: 'number', min: 1, inputmode: 'numeric', value: filters.decision });
  const phaseSelect = h('select', { id: 'filter-phase' },
    h('option', { value: '', text: 'Any phase' }),
    PHASES.map((p) => h('option', { value: p, text: p, selected: p === filters.phase })));
  const clusterInput = h('input', { id: 'filter-cluster', type: 'text', spellcheck: 'false', value: filters.cluster });
  const nodeInput = h('input', { id: 'filter-node', type: 'text', spellcheck: 'false', value: filters.node });
  const form = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter pod migrations' },
    h('div', { class: 'field' }, h('label', { for: 'filter-decision', text: 'Decision' }), decisionInput),
    h('div', { class: 'field' }, h('label', { for: 'filter-phase', text: 'Phase' }), phaseSelect),
    h('div', { class: 'field' }, h('label', { for: 'filter-cluster', text: 'Cluster' }), clusterInput),
    h('div', { class: 'field' }, h('label', { for: 'filter-node', text: 'Node' }), nodeInput),
    h('div', { class: 'actions' },
      h('button', { type: 'submit', text: 'Apply filters' }),
      h('a', { href: '#/pod-migrations', class: 'button secondary', text: 'Clear' })));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    location.hash = routeWithQuery('#/pod-migrations', {
      decision: decisionInput.value.trim(),
      phase: phaseSelect.value,
      cluster: clusterInput.value.trim(),
      node: nodeInput.value.trim(),
    });
  });
  const refresh = h('button', { type: 'button', class: 'secondary', text: 'Refresh' });
  append(ctx.main, h('h1', { text: 'Pod migrations' }),
    h('p', { class: 'lead', text: 'Each approved decision is carried out as a pod migration: reserve room on a target node, evict, and confirm the replacement landed.' }),
    form, listHolder);

  const draw = async () => {
    const data = await api('/pod-migrations', { query: filters, signal: ctx.signal });
    const items = data.items.filter((m) => !filters.phase || m.phase === filters.phase);
    if (items.length === 0) {
      replace(listHolder, empty(Object.values(filters).some(Boolean)
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
        className: 'migrations',
        rows: items.map((m) => h('tr', { dataset: { id: m.id, phase: m.phase } },
          h('th', { scope: 'row' }, h('a', { href: route('pod-migrations', m.id), text: `#${m.id}` })),
          h('td', { class: 'num' }, m.decision !== undefined && m.decision !== null ? h('a', { href: route('decisions', m.decision), text: `#${m.decision}` }) : '—'),
          h('td', { class: 'pod', text: podOf(m) ?? '—' }),
          h('td', { text: m.mode ?? '—' }),
          h('td', {}, badge(m.phase), m.status ? h('span', { class: 'sub', text: m.status }) : null),
          h('td', { class: 'node' }, nodes(m)),
          h('td', { class: 'reason' }, m.reason ? h('strong', { text: m.reason }) : null, m.message ? [m.reason ? ': ' : '', m.message] : null),
          h('td', {}, time(m.updatedAt)))),
      }));
  };
  const liveRefresh = debounce(() => draw().catch((err) => {
    if (err?.name !== 'AbortError') prepend(listHolder, errorBox(err, 'Refreshing'));
  }), 400);
  ctx.live.on('migration', liveRefresh);
  ctx.onLeave(() => liveRefresh.cancel());
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



/** The steps of a pod migration, each starting at the first event that matches. */
const STEPS = [
  { key: 'waiting', label: 'Waiting for arbitration', start: () => true },
  { key: 'reservation', label: 'Reservation', start: (e) => /reserv|placeholder/i.test(e.reason) },
  { key: 'eviction', label: 'Eviction', start: (e) => /^evict/i.test(e.reason) && !/complete|evicted/i.test(e.reason) },
  { key: 'replacement', label: 'Replacement seen', start: (e) => /evict(complete|ed)|podevicted/i.test(e.reason) },
  { key: 'cleanup', label: 'Cleanup', start: (e) => /boundpodready|replacement(ready|seen)|ready$/i.test(e.reason) },
];

const ms = (t) => new Date(t).getTime();

/** Group events into STEPS: [{key, label, start, end, events}] (steps not reached have no start). */
export function timelineSteps(m, events) {
  const sorted = [...events].sort((a, b) => ms(a.time) - ms(b.time));
  const starts = [];
  let from = 0;
  for (const step of STEPS) {
    const index = sorted.findIndex((e, i) => i >= from && step.start(e));
    starts.push(index);
    if (index >= 0) from = index;
  }
  const end = m.finishedAt ? ms(m.finishedAt) : (sorted.length ? ms(sorted[sorted.length - 1].time) : null);
  return STEPS.map((step, i) => {
    const index = starts[i];
    if (index < 0) return { ...step, label: step.key === 'reservation' && m.reservationKind ? m.reservationKind : step.label, start: null, end: null, events: [] };
    const nextIndex = starts.slice(i + 1).find((s) => s >= 0);
    const startTime = ms(sorted[index].time);
    const endTime = nextIndex !== undefined ? ms(sorted[nextIndex].time) : end;
    const stepEvents = sorted.slice(index, nextIndex !== undefined ? nextIndex : sorted.length);
    const label = step.key === 'reservation' ? (m.reservationKind ?? (/placeholder/i.test(stepEvents.map((e) => e.reason).join(' ')) ? 'placeholder pod' : 'Reservation')) : step.label;
    return { ...step, label, start: startTime, end: endTime, events: stepEvents };
  });
}

function timeline(m, events) {
  const steps = timelineSteps(m, events);
  const t0 = steps[0].start ?? ms(m.createdAt);
  const t1 = Math.max(t0 + 1, ...steps.filter((s) => s.end !== null).map((s) => s.end));
  const span = t1 - t0;
  return h('ol', { class: 'timeline', 'aria-label': `Steps on a time axis of ${span} ms` }, steps.map((s) => {
    const reached = s.start !== null;
    const duration = reached ? s.end - s.start : null;
    const axis = h('span', { class: 'tl-axis', 'aria-hidden': 'true' });
    if (reached) {
      const bar = h('span', { class: 'tl-span' });
      bar.style.left = `${(100 * (s.start - t0)) / span}%`;
      bar.style.width = `${Math.max(0.5, (100 * duration) / span)}%`;
      axis.appendChild(bar);
    }
    const warning = s.events.some((e) => e.type === 'Warning');
    return h('li', { class: `tl-step tl-step-${reached ? (warning ? 'warning' : 'done') : 'pending'}`, dataset: { step: s.key } },
      h('span', { class: 'tl-when' }, reached ? [h('span', { class: 'tl-duration', text: `${duration} ms` }), h('span', { class: 'sub', text: `at +${s.start - t0} ms` })] : 'not reached'),
      h('span', { class: 'tl-what' }, h('strong', { text: s.label }),
        s.events.length ? h('span', { class: 'sub', text: s.events.map((e) => `${e.reason} (+${ms(e.time) - t0} ms)`).join(' · ') }) : null),
      axis);
  }));
}

export async function detail(ctx) {
  const id = ctx.params.id;
  ctx.setTitle(`Pod migration #${id}`);
  const summary = h('div', {}, loading('the pod migration'));
  const actionResult = h('div', { class: 'result', 'aria-live': 'polite' });
  const connection = h('div', { class: 'result', 'aria-live': 'polite' });
  const canAbort = allowed(ctx.me, 'abort');
  const abortButton = h('button', { type: 'button', class: 'danger', text: 'Abort this pod migration', hidden: true });
  const abortNotice = h('div', {});
  const timelineSection = h('section', { 'aria-labelledby': 'timeline-title' }, h('h2', { id: 'timeline-title', text: 'Timeline' }));
  const eventsSection = h('section', { 'aria-labelledby': 'events-title' }, h('h2', { id: 'events-title', text: 'Events' }));
  const comment = h('textarea', { id: 'abort-comment', name: 'comment', rows: 2, maxlength: 2000 });
  const dialog = h('dialog', { class: 'dialog', 'aria-labelledby': 'abort-title' },
    h('form', { method: 'dialog' },
      h('h2', { id: 'abort-title', text: `Abort pod migration #${id}?` }),
      h('p', { text: 'The reservation is released. A pod that was already evicted is not brought back.' }),
      h('label', { for: 'abort-comment', text: 'Comment (optional): why' }), comment,
      h('div', { class: 'actions' },
        h('button', { type: 'submit', value: 'cancel', class: 'secondary', text: 'Keep it running' }),
        h('button', { type: 'submit', value: 'abort', class: 'danger', text: 'Abort' }))));
  append(ctx.main,
    h('p', { class: 'crumbs' }, h('a', { href: '#/pod-migrations', text: 'Pod migrations' }), ' / ', `#${id}`),
    h('h1', { text: `Pod migration #${id}` }), summary, h('div', { class: 'toolbar' }, abortButton), abortNotice, actionResult, connection,
    timelineSection, eventsSection, dialog);

  let timer = null;
  let failures = 0;
  let phase = null;
  const node = (m, name) => (name ? h('a', { href: route('clusters', m.cluster, 'nodes', name), text: name }) : '—');
  const draw = (m) => {
    phase = m.phase;
    replace(summary, facts([
      ['Phase', badge(m.phase)],
      ['Status', m.status || '—'],
      ['Reason', m.reason || '—'],
      ['Message', m.message || '—'],
      ['Decision', h('a', { href: route('decisions', m.decision), text: `Decision #${m.decision}` })],
      ['Pod', m.pod ? h('a', { href: route('clusters', m.cluster, 'nodes', m.sourceNode), title: `uid ${m.pod.uid}`, text: podOf(m) }) : '—'],
      ['Cluster', h('a', { href: route('clusters', m.cluster), text: m.cluster })],
      ['Mode', m.mode ?? '—'],
      ['Source → target', h('span', { class: 'nodes-move' }, node(m, m.sourceNode), h('span', { 'aria-label': ' to ', text: ' → ' }), node(m, m.targetNode))],
      ['Reservation', m.reservation ? `${m.reservationKind ? `${m.reservationKind} ` : ''}${m.reservation}${m.reservationReleased ? ' (released)' : ''}` : '—'],
      ['Replacement pod', m.newPod ? h('span', {}, m.newPod.name ?? m.newPod.uid, m.newPod.node ? [' on ', node(m, m.newPod.node)] : null) : '—'],
      ['TTL', m.ttlSeconds ? `${m.ttlSeconds} s` : 'none'],
      ['Created', time(m.createdAt)],
      ['Started', time(m.startedAt)],
      ['Finished', time(m.finishedAt)],
    ]));
    const active = ACTIVE.has(m.phase);
    abortButton.hidden = !active || !canAbort;
    replace(abortNotice, active ? roleNotice(ctx.me, 'abort') : null);
    const events = Array.isArray(m.events) ? m.events : [];
    replace(timelineSection, timelineSection.firstChild, events.length ? timeline(m, events) : empty('No events recorded yet.'));
    replace(eventsSection, eventsSection.firstChild, events.length === 0 ? empty('No events recorded yet.') : table({
      caption: 'Events, oldest first',
      hiddenCaption: true,
      columns: ['Time', 'Type', 'Reason', 'Message'],
      className: 'events',
      rows: events.map((e) => h('tr', {},
        h('td', {}, time(e.time), h('span', { class: 'sub', text: `+${ms(e.time) - ms(events[0].time)} ms` })),
        h('td', {}, badge(e.type)),
        h('th', { scope: 'row', text: e.reason }),
        h('td', { text: e.message }))),
    }));
  };
  const fetchOne = () => api(`/pod-migrations/${encodeURIComponent(id)}`, { signal: ctx.signal });
  /** Poll while active: every 2 s while live updates are cut, every 10 s otherwise; back off on errors, never stop. */
  const schedule = () => {
    clearTimeout(timer);
    if (ctx.signal.aborted || (phase !== null && !ACTIVE.has(phase))) return;
    const base = ctx.live.stale ? POLL_MS : 5 * POLL_MS;
    timer = setTimeout(poll, failures ? Math.min(POLL_MAX_MS, POLL_MS * 2 ** failures) : base);
  };
  const poll = () => fetchOne().then((m) => {
    if (failures) replace(connection, h('p', { class: 'ok', text: 'Reconnected: the pod migration is up to date.' }));
    if (phase === null) replace(summary);
    failures = 0;
    draw(m);
  }).catch((err) => {
    if (err?.name === 'AbortError') return;
    failures += 1;
    replace(connection, errorBox(err, `Refreshing (attempt ${failures}; retrying)`));
  }).finally(schedule);
  const liveRefresh = debounce(poll, 200);
  ctx.live.on('migration', (data, meta) => {
    if (meta?.reset || String(data.id) === String(id)) liveRefresh();
  });
  ctx.onLeave(() => { clearTimeout(timer); liveRefresh.cancel(); });

  abortButton.addEventListener('click', () => {
    comment.value = '';
    dialog.showModal();
  });
  dialog.addEventListener('close', async () => {
    if (dialog.returnValue !== 'abort') return;
    abortButton.disabled = true;
    try {
      const text = comment.value.trim();
      const m = await api(`/pod-migrations/${encodeURIComponent(id)}/abort`, { method: 'POST', body: text ? { comment: text } : {}, signal: ctx.signal });
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

  try {
    draw(await fetchOne());
  } catch (err) {
    if (err?.name === 'AbortError' || err?.status === 404) throw err;
    // Not loaded yet: say why and keep trying.
    failures = 1;
    replace(summary, errorBox(err, 'Loading (retrying)'));
  }
  schedule();
}
