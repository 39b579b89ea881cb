// Profiles: DeschedulerPolicy documents, read-only.

import { api } from '../api.js';
import { append, empty, facts, h, loading, replace, route, table, time } from '../dom.js';

function pluginSets(profile) {
  return profile.document?.profiles ?? [];
}

function enabledPlugins(set) {
  const points = set.plugins ?? {};
  return Object.entries(points).flatMap(([point, v]) => (v?.enabled ?? []).map((name) => `${name} (${point})`));
}

export async function list(ctx) {
  ctx.setTitle('Profiles');
  const body = h('div', {}, loading('profiles'));
  append(ctx.main, h('h1', { text: 'Profiles' }),
    h('p', { class: 'lead', text: 'A profile is one DeschedulerPolicy (descheduler/v1alpha2) document. Store one with PUT /api/v1/profiles/{name} (admin).' }),
    body);
  const data = await api('/profiles', { signal: ctx.signal });
  if (data.items.length === 0) {
    replace(body, empty('No profiles are stored.'));
    return;
  }
  replace(body, table({
    caption: 'Profiles',
    hiddenCaption: true,
    columns: ['Name', 'Plugin sets', 'Enabled plugins', 'Warnings', 'Updated'],
    rows: data.items.map((p) => h('tr', {},
      h('th', { scope: 'row' }, h('a', { href: route('profiles', p.name), text: p.name })),
      h('td', { text: pluginSets(p).map((s) => s.name).join(', ') || '—' }),
      h('td', { class: 'description', text: pluginSets(p).flatMap(enabledPlugins).join(', ') || '—' }),
      h('td', { class: 'num', text: (p.warnings ?? []).length }),
      h('td', {}, time(p.updatedAt)))),
  }));
}

export async function detail(ctx) {
  const { name } = ctx.params;
  ctx.setTitle(`Profile ${name}`);
  const body = h('div', {}, loading('the profile'));
  append(ctx.main, 
    h('p', { class: 'crumbs' }, h('a', { href: '#/profiles', text: 'Profiles' }), ' / ', name),
    h('h1', { text: `Profile ${name}` }), body);
  const p = await api(`/profiles/${encodeURIComponent(name)}`, { signal: ctx.signal });
  const warnings = p.warnings ?? [];
  replace(body, 
    facts([
      ['Plugin sets', pluginSets(p).map((s) => s.name).join(', ') || '—'],
      ['Created', time(p.createdAt)],
      ['Updated', time(p.updatedAt)],
    ]),
    h('p', {}, h('a', { class: 'button', href: `#/runs?profile=${encodeURIComponent(name)}`, text: 'Start a run with this profile' })),
    warnings.length ? h('section', { 'aria-labelledby': 'warnings-title' },
      h('h2', { id: 'warnings-title', text: 'Warnings' }),
      h('ul', {}, warnings.map((w) => h('li', { text: typeof w === 'string' ? w : (w.message ?? JSON.stringify(w)) })))) : null,
    h('section', { 'aria-labelledby': 'document-title' },
      h('h2', { id: 'document-title', text: 'DeschedulerPolicy document' }),
      h('pre', { class: 'document', tabindex: '0', 'aria-label': `DeschedulerPolicy of profile ${name}`, text: JSON.stringify(p.document, null, 2) })));
}
