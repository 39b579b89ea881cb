// Schedules: runs of a profile over a cluster, every so often and/or after the cluster changes.
// Everyone reads them; operators and admins create, edit, pause/resume and delete them.
//
// Owns: the schedule form (create and edit) and the row actions.
// Must not: check the values itself: the server's 422 is shown as it says it.

import { api } from '../api.js';
import {
  append, badge, empty, errorBox, h, loading, replace, route, table, time,
} from '../dom.js';
import {
  adminNav, allowed, confirmAction, guarded, problemList, fieldProblems,
} from './admin-kit.js';

function every(seconds) {
  if (!seconds) return '—';
  if (seconds % 86400 === 0) return `${seconds / 86400} d`;
  if (seconds % 3600 === 0) return `${seconds / 3600} h`;
  if (seconds % 60 === 0) return `${seconds / 60} min`;
  return `${seconds} s`;
}

/** The request body of a schedule (PUT replaces the whole of it). */
function requestOf(s) {
  return {
    cluster: s.cluster,
    profile: s.profile,
    intervalSeconds: s.intervalSeconds ?? null,
    onChange: Boolean(s.onChange),
    debounceSeconds: s.debounceSeconds,
    dryRun: Boolean(s.dryRun),
    enabled: s.enabled !== false,
  };
}

function scheduleForm(ctx, { clusters, profiles, onSaved }) {
  let editing = null;
  const title = h('h2', { id: 'schedule-form-title', tabindex: '-1', text: 'New schedule' });
  const cluster = h('select', { id: 'schedule-cluster', required: true }, clusters.map((c) => h('option', { value: c, text: c })));
  const profile = h('select', { id: 'schedule-profile', required: true }, profiles.map((p) => h('option', { value: p, text: p })));
  const interval = h('input', { id: 'schedule-interval', type: 'number', min: 1, step: 1, inputmode: 'numeric', 'aria-describedby': 'schedule-interval-help' });
  const onChange = h('input', { id: 'schedule-onchange', type: 'checkbox' });
  const debounce = h('input', { id: 'schedule-debounce', type: 'number', min: 0, step: 1, value: 30 });
  const dryRun = h('input', { id: 'schedule-dryrun', type: 'checkbox' });
  const enabled = h('input', { id: 'schedule-enabled', type: 'checkbox', checked: true });
  const result = h('div', { 'aria-live': 'polite' });
  const submit = h('button', { type: 'submit', text: 'Create schedule' });
  const cancel = h('button', { type: 'button', class: 'secondary', text: 'Cancel editing', hidden: true });
  const field = (id, label, control, help) => h('div', { class: 'field' }, h('label', { for: id, text: label }), control,
    help ? h('p', { id: `${id}-help`, class: 'help', text: help }) : null);
  const check = (id, label, control) => h('div', { class: 'field checkbox' }, control, h('label', { for: id, text: label }));
  const form = h('form', { class: 'card', 'aria-labelledby': 'schedule-form-title' }, title,
    h('div', { class: 'form-grid' },
      field('schedule-cluster', 'Cluster', cluster),
      field('schedule-profile', 'Profile', profile),
      field('schedule-interval', 'Every (seconds)', interval, 'Empty: only after changes.'),
      check('schedule-onchange', 'Also after the cluster changes', onChange),
      field('schedule-debounce', 'Quiet time after a change (seconds)', debounce),
      check('schedule-dryrun', 'Dry runs (never approvable)', dryRun),
      check('schedule-enabled', 'Enabled', enabled)),
    h('div', { class: 'actions' }, submit, cancel),
    result);
  const reset = () => {
    editing = null;
    title.textContent = 'New schedule';
    submit.textContent = 'Create schedule';
    cancel.hidden = true;
    interval.value = '';
    onChange.checked = false;
    debounce.value = 30;
    dryRun.checked = false;
    enabled.checked = true;
  };
  cancel.addEventListener('click', reset);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    replace(result);
    const body = {
      cluster: cluster.value,
      profile: profile.value,
      intervalSeconds: interval.value ? Number(interval.value) : null,
      onChange: onChange.checked,
      debounceSeconds: debounce.value === '' ? null : Number(debounce.value),
      dryRun: dryRun.checked,
      enabled: enabled.checked,
    };
    submit.disabled = true;
    try {
      const saved = editing === null
        ? await api('/schedules', { method: 'POST', body })
        : await api(`/schedules/${editing}`, { method: 'PUT', body });
      ctx.flash(`Schedule #${saved.id} ${editing === null ? 'created' : 'saved'}.`);
      reset();
      await onSaved(saved);
    } catch (err) {
      replace(result, fieldProblems(err).length ? problemList(err) : errorBox(err, 'Saving the schedule'));
    } finally {
      submit.disabled = false;
    }
  });
  form.edit = (s) => {
    editing = s.id;
    title.textContent = `Edit schedule #${s.id}`;
    submit.textContent = 'Save schedule';
    cancel.hidden = false;
    cluster.value = s.cluster;
    profile.value = s.profile;
    interval.value = s.intervalSeconds ?? '';
    onChange.checked = s.onChange;
    debounce.value = s.debounceSeconds;
    dryRun.checked = s.dryRun;
    enabled.checked = s.enabled;
    title.focus();
  };
  return form;
}

export async function page(ctx) {
  ctx.setTitle('Schedules');
  const body = h('section', { 'aria-labelledby': 'schedules-title' }, h('h2', { id: 'schedules-title', text: 'Schedules' }), loading('schedules'));
  append(ctx.main, adminNav('admin/schedules'), h('h1', { text: 'Schedules' }),
    h('p', { class: 'lead', text: 'Runs started every so often and/or once a cluster has been quiet for a while after a change.' }));
  const [clusters, profiles] = await Promise.all([
    api('/clusters', { signal: ctx.signal }),
    api('/profiles', { signal: ctx.signal }),
  ]);
  const mayRun = allowed(ctx, 'run');
  let form = null;
  const formHolder = guarded(ctx, 'run', 'Creating or changing schedules', () => {
    form = scheduleForm(ctx, {
      clusters: clusters.items.map((c) => c.name),
      profiles: profiles.items.map((p) => p.name),
      onSaved: () => draw(),
    });
    return form;
  });
  append(ctx.main, body, formHolder);

  async function act(label, fn) {
    try {
      await fn();
      await draw();
    } catch (err) {
      body.insertBefore(errorBox(err, label), body.children[1] ?? null);
    }
  }

  async function draw() {
    const data = await api('/schedules', { signal: ctx.signal });
    const heading = body.firstChild;
    if (!data.items.length) {
      replace(body, heading, empty('No schedules.'));
      return;
    }
    replace(body, heading, table({
      caption: 'Every schedule', hiddenCaption: true, className: 'schedules cards',
      columns: ['#', 'Cluster', 'Profile', 'Every', 'After changes', 'Dry run', 'State', 'Last run', mayRun ? 'Actions' : null].filter(Boolean),
      rows: data.items.map((s) => h('tr', { dataset: { id: String(s.id) } },
        h('th', { scope: 'row', 'data-label': '#', text: `#${s.id}` }),
        h('td', { 'data-label': 'Cluster' }, h('a', { href: route('clusters', s.cluster), text: s.cluster })),
        h('td', { 'data-label': 'Profile' }, h('a', { href: route('profiles', s.profile), text: s.profile })),
        h('td', { 'data-label': 'Every', text: every(s.intervalSeconds) }),
        h('td', { 'data-label': 'After changes', text: s.onChange ? `yes, after ${s.debounceSeconds} s quiet` : 'no' }),
        h('td', { 'data-label': 'Dry run', text: s.dryRun ? 'yes' : 'no' }),
        h('td', { 'data-label': 'State' }, badge(s.enabled ? 'enabled' : 'paused'),
          s.lastError ? h('span', { class: 'sub error-inline', text: s.lastError }) : null),
        h('td', { 'data-label': 'Last run' }, s.lastRun ? h('a', { href: route('runs', s.lastRun), text: `Run #${s.lastRun}` }) : '—',
          s.lastTriggeredAt ? h('span', { class: 'sub' }, time(s.lastTriggeredAt)) : null),
        mayRun ? h('td', { 'data-label': 'Actions', class: 'row-actions' },
          h('button', { type: 'button', class: 'small secondary', text: 'Edit', 'aria-label': `Edit schedule #${s.id}`, onclick: () => form?.edit(s) }),
          h('button', {
            type: 'button', class: 'small secondary', text: s.enabled ? 'Pause' : 'Resume', 'aria-label': `${s.enabled ? 'Pause' : 'Resume'} schedule #${s.id}`,
            onclick: () => act('Changing the schedule', () => api(`/schedules/${s.id}`, { method: 'PUT', body: { ...requestOf(s), enabled: !s.enabled } })),
          }),
          h('button', {
            type: 'button', class: 'small danger', text: 'Delete', 'aria-label': `Delete schedule #${s.id}`,
            onclick: async () => {
              if (!await confirmAction({ title: `Delete schedule #${s.id}?`, message: 'The runs it started are kept.', confirm: 'Delete', danger: true })) return;
              await act('Deleting the schedule', () => api(`/schedules/${s.id}`, { method: 'DELETE' }));
              ctx.flash(`Schedule #${s.id} deleted.`);
            },
          })) : null)),
    }));
  }
  await draw();
}
