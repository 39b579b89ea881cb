// Retention: how long history is kept. GET /retention answers the keep times in force
// (`effective`: the --retain-* flags with the admins' overrides on top), the flags' own values
// (`defaults`), the overrides, and the last pruning pass; PUT /retention replaces the overrides
// (a field left empty follows its flag again), taking effect at the next pass.
//
// Owns: the overrides form; the fields come from the answer, so a setting the server adds
// appears without a change here.

import { api } from '../api.js';
import {
  append, errorBox, facts, h, loading, replace, time,
} from '../dom.js';
import {
  adminNav, allowed, fieldProblems, guarded, problemList,
} from './admin-kit.js';

const LABELS = {
  proposals: 'Expired proposals of runs',
  dryRuns: 'Proposals of dry runs',
  history: 'Finished pod migrations, rejected decisions, events',
  runs: 'Runs without decisions left',
  audit: 'Audit log',
  interval: 'Pruning interval',
};

export async function page(ctx) {
  ctx.setTitle('Retention');
  const body = h('div', {}, loading('the retention settings'));
  append(ctx.main, adminNav('admin/retention'), h('h1', { text: 'Retention' }),
    h('p', { class: 'lead', text: 'How long the server keeps history before pruning it. Changes take effect at the next pruning pass.' }),
    body);
  const answer = await api('/retention', { signal: ctx.signal });
  const effective = answer.effective ?? {};
  const defaults = answer.defaults ?? {};
  const overrides = answer.overrides ?? {};
  const last = answer.lastPass ?? null;
  const readOnly = !allowed(ctx, 'admin');
  const result = h('div', { 'aria-live': 'polite' });
  const fields = Object.keys(effective).map((key) => {
    const id = `retention-${key}`;
    const overridden = overrides[key] !== undefined && overrides[key] !== null;
    const input = h('input', {
      id, name: key, value: overrides[key] ?? '', placeholder: `flag: ${defaults[key] ?? '—'}`,
      readonly: readOnly || null, 'aria-describedby': `${id}-help ${id}-error`,
    });
    return h('div', { class: 'field', dataset: { key } },
      h('label', { for: id, text: LABELS[key] ? `${LABELS[key]} (${key})` : key }), input,
      h('p', { id: `${id}-help`, class: 'help', text: `In force: ${effective[key] === '0' ? 'forever (0)' : effective[key]}${overridden ? ' (overridden here)' : ' (from the flag)'}` }),
      h('p', { id: `${id}-error`, class: 'field-error', 'aria-live': 'polite' }));
  });
  const form = h('form', { class: 'card', 'aria-labelledby': 'retention-title' },
    h('h2', { id: 'retention-title', text: 'Keep for' }),
    h('p', { class: 'help', text: 'Overrides of the --retain-* flags: durations such as 7d, 12h or 90d, 0 for forever; empty follows the flag.' }),
    h('div', { class: 'form-grid' }, fields),
    readOnly ? null : h('div', { class: 'actions' }, h('button', { type: 'submit', text: 'Save retention' })),
    result);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    for (const e of form.querySelectorAll('.field-error')) e.textContent = '';
    const out = {};
    for (const input of form.querySelectorAll('input')) out[input.name] = input.value.trim() === '' ? null : input.value.trim();
    try {
      await api('/retention', { method: 'PUT', body: out });
      ctx.flash('Retention saved; it applies from the next pruning pass.');
      ctx.reload();
    } catch (err) {
      for (const p of fieldProblems(err)) {
        const slot = form.querySelector(`#retention-${p.field.split(/[.[]/)[0]}-error`);
        if (slot) slot.textContent = `${p.field}: ${p.message}`;
      }
      replace(result, fieldProblems(err).length ? problemList(err) : errorBox(err, 'Saving retention'));
    }
  });
  replace(body,
    guarded(ctx, 'admin', 'Changing retention', null),
    form,
    h('p', { class: 'help' }, answer.updatedAt ? ['Overrides last set ', time(answer.updatedAt), '. '] : 'No overrides set yet. ',
      answer.events ? `The live-events feed keeps ${answer.events.keep} (at most ${answer.events.maxEvents} events); that is fixed.` : null),
    h('section', { 'aria-labelledby': 'last-pass-title' },
      h('h2', { id: 'last-pass-title', text: 'Last pruning pass' }),
      last ? facts(Object.entries(last).map(([k, v]) => [k,
        typeof v === 'string' && /^\d{4}-\d\d-\d\dT/.test(v) ? time(v)
          : typeof v === 'object' && v !== null ? h('code', { text: JSON.stringify(v) }) : String(v)]))
        : h('p', { class: 'help', text: 'None yet since the server started.' })));
}
