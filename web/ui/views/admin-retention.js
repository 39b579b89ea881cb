// Retention: how long history is kept (GET /retention: the settings in force and the last
// pruning pass), and the admins' overrides (PUT /retention, taking effect at the next pass).
//
// The form is built from the fields the server answers (durations such as `30d`, or null for
// "keep forever"), so a setting the server adds appears without a change here.

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

/** The settings object of a GET /retention answer: `settings`/`effective` if nested, else the flat fields. */
function settingsOf(answer) {
  const nested = answer?.settings ?? answer?.effective;
  if (nested && typeof nested === 'object') return nested;
  return Object.fromEntries(Object.entries(answer ?? {}).filter(([, v]) => v === null || ['string', 'number', 'boolean'].includes(typeof v)));
}

function lastPassOf(answer) {
  return answer?.lastPass ?? answer?.last ?? null;
}

export async function page(ctx) {
  ctx.setTitle('Retention');
  const body = h('div', {}, loading('the retention settings'));
  append(ctx.main, adminNav('admin/retention'), h('h1', { text: 'Retention' }),
    h('p', { class: 'lead', text: 'How long the server keeps history before pruning it. Changes take effect at the next pruning pass.' }),
    body);
  let answer;
  try {
    answer = await api('/retention', { signal: ctx.signal });
  } catch (err) {
    if (err?.status === 404) {
      replace(body, errorBox(err, 'Reading the retention settings'),
        h('p', { class: 'help', text: 'This server has no GET /api/v1/retention: its retention is set only by the --retain-* flags at start-up.' }));
      return;
    }
    throw err;
  }
  const settings = settingsOf(answer);
  const last = lastPassOf(answer);
  const readOnly = !allowed(ctx, 'admin');
  const result = h('div', { 'aria-live': 'polite' });
  const fields = Object.entries(settings).map(([key, value]) => {
    const id = `retention-${key}`;
    const input = typeof value === 'boolean'
      ? h('input', { id, name: key, type: 'checkbox', checked: value, disabled: readOnly || null })
      : h('input', { id, name: key, value: value ?? '', placeholder: 'forever', readonly: readOnly || null, dataset: { kind: typeof value }, 'aria-describedby': `${id}-error` });
    return h('div', { class: 'field', dataset: { key } },
      h('label', { for: id, text: LABELS[key] ? `${LABELS[key]} (${key})` : key }), input,
      h('p', { id: `${id}-error`, class: 'field-error', 'aria-live': 'polite' }));
  });
  const form = h('form', { class: 'card', 'aria-labelledby': 'retention-title' },
    h('h2', { id: 'retention-title', text: 'Keep for' }),
    h('p', { class: 'help', text: 'Durations such as 7d, 12h or 90d; empty keeps forever (where the server allows it).' }),
    h('div', { class: 'form-grid' }, fields),
    readOnly ? null : h('div', { class: 'actions' }, h('button', { type: 'submit', text: 'Save retention' })),
    result);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    for (const e of form.querySelectorAll('.field-error')) e.textContent = '';
    const out = {};
    for (const input of form.querySelectorAll('input')) {
      if (input.type === 'checkbox') out[input.name] = input.checked;
      else if (input.dataset.kind === 'number') out[input.name] = input.value === '' ? null : Number(input.value);
      else out[input.name] = input.value.trim() === '' ? null : input.value.trim();
    }
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
    h('section', { 'aria-labelledby': 'last-pass-title' },
      h('h2', { id: 'last-pass-title', text: 'Last pruning pass' }),
      last ? facts(Object.entries(last).map(([k, v]) => [k,
        typeof v === 'string' && /^\d{4}-\d\d-\d\dT/.test(v) ? time(v)
          : typeof v === 'object' && v !== null ? h('code', { text: JSON.stringify(v) }) : String(v)]))
        : h('p', { class: 'help', text: 'None yet since the server started.' })));
}
