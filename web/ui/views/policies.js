// Policies: the registered WebAssembly modules (built-in and uploaded), read-only.

import { api } from '../api.js';
import { append, badge, empty, formatBytes, h, loading, replace, table } from '../dom.js';

export async function list(ctx) {
  ctx.setTitle('Policies');
  const body = h('div', {}, loading('policies'));
  append(ctx.main, h('h1', { text: 'Policies' }),
    h('p', { class: 'lead', text: 'WebAssembly policy modules. Built-ins ship with the server; upload your own with POST /api/v1/policies (admin).' }),
    body);
  const data = await api('/policies', { signal: ctx.signal });
  if (data.items.length === 0) {
    replace(body, empty('No policies are registered.'));
    return;
  }
  replace(body, table({
    caption: 'Policies',
    hiddenCaption: true,
    columns: ['Name', 'Version', 'Kind', 'Extension points', 'ABI', 'Size', 'Digest', 'Description'],
    className: 'policies',
    rows: data.items.map((p) => h('tr', {},
      h('th', { scope: 'row' }, p.name, p.loaded === false ? [' ', badge('not loaded')] : null),
      h('td', { text: p.version }),
      h('td', {}, badge(p.builtin ? 'built-in' : 'uploaded')),
      h('td', { text: (p.extensionPoints ?? []).join(', ') }),
      h('td', { text: p.abiVersion }),
      h('td', { class: 'num', text: formatBytes(p.sizeBytes) }),
      h('td', {}, h('code', { title: p.digest, text: (p.digest ?? '').slice(0, 12) })),
      h('td', { class: 'description' }, p.description,
        p.defaultArgs && Object.keys(p.defaultArgs).length ? h('details', {},
          h('summary', { text: 'Default arguments' }),
          h('pre', { text: JSON.stringify(p.defaultArgs, null, 2) })) : null))),
  }));
}
