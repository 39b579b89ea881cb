// Policies: the registered WebAssembly modules (built-in and uploaded) with each one's
// arguments schema and defaults; admins upload a .wasm (the server's refusal shown verbatim)
// and delete uploads.
//
// Owns: the upload form (the .wasm sent as the raw body) and the arguments table of a policy.
// Must not: inspect the module: the server's refusal is the message shown.

import { api } from '../api.js';
import {
  append, badge, empty, errorBox, formatBytes, h, loading, replace, table,
} from '../dom.js';
import {
  adminNav, allowed, apiRaw, confirmAction, guarded,
} from './admin-kit.js';

/** A schema's type in words (`integer`, `number | string`, `object`…). */
function typeOf(schema) {
  if (!schema || typeof schema !== 'object') return '—';
  if (Array.isArray(schema.type)) return schema.type.join(' | ');
  if (schema.type) return schema.type;
  if (schema.oneOf || schema.anyOf) return (schema.oneOf ?? schema.anyOf).map(typeOf).join(' | ');
  if (schema.$ref) return schema.$ref.split('/').pop();
  return 'any';
}

function value(v) {
  return v === undefined ? '—' : JSON.stringify(v);
}

/** The arguments of a policy: one row per top-level property, and the whole schema as JSON. */
export function argsTable(policy) {
  const schema = policy.argsSchema ?? {};
  const defaults = policy.defaultArgs ?? {};
  const props = schema.properties ?? {};
  const names = [...new Set([...Object.keys(props), ...Object.keys(defaults)])];
  return h('div', { class: 'args' },
    names.length ? table({
      caption: `Arguments of ${policy.name}`,
      hiddenCaption: true,
      className: 'args-table cards',
      columns: ['Argument', 'Type', 'Default', 'Description'],
      rows: names.map((n) => h('tr', {},
        h('th', { scope: 'row', 'data-label': 'Argument' }, h('code', { text: n }), (schema.required ?? []).includes(n) ? ' (required)' : null),
        h('td', { 'data-label': 'Type', text: typeOf(props[n]) }),
        h('td', { 'data-label': 'Default' }, h('code', { text: value(defaults[n] ?? props[n]?.default) })),
        h('td', { 'data-label': 'Description', class: 'description', text: props[n]?.description ?? '' }))),
    }) : h('p', { class: 'help', text: 'This policy takes no arguments.' }),
    h('details', {}, h('summary', { text: 'Arguments schema (JSON Schema)' }),
      h('pre', { tabindex: '0', 'aria-label': `Arguments schema of ${policy.name}`, text: JSON.stringify(schema, null, 2) })),
    h('details', {}, h('summary', { text: 'Default arguments (JSON)' }),
      h('pre', { tabindex: '0', 'aria-label': `Default arguments of ${policy.name}`, text: JSON.stringify(defaults, null, 2) })));
}

function uploadForm(ctx) {
  const input = h('input', { id: 'wasm-file', type: 'file', accept: '.wasm,application/wasm', required: true, 'aria-describedby': 'wasm-help' });
  const button = h('button', { type: 'submit', text: 'Upload policy' });
  const result = h('div', { id: 'upload-result', 'aria-live': 'polite' });
  const form = h('form', { class: 'card upload', 'aria-labelledby': 'upload-title' },
    h('h2', { id: 'upload-title', text: 'Upload a policy' }),
    h('div', { class: 'field' }, h('label', { for: 'wasm-file', text: 'WebAssembly component (.wasm)' }), input,
      h('p', { id: 'wasm-help', class: 'help', text: 'A component built against the policy ABI (see policy-sdk). The server validates, compiles and introspects it before storing it; an upload with the name of an earlier upload replaces it.' })),
    h('div', { class: 'actions' }, button),
    result);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const file = input.files?.[0];
    if (!file) return;
    button.disabled = true;
    replace(result, h('p', { class: 'state loading', text: `Uploading ${file.name} (${formatBytes(file.size)})…` }));
    try {
      const answer = await apiRaw('/policies', { method: 'POST', body: file, contentType: 'application/wasm' });
      const policy = JSON.parse(answer.text);
      ctx.flash(`Policy ${policy.name} ${policy.version} ${answer.status === 201 ? 'registered' : 'replaced'}.`);
      ctx.reload();
    } catch (err) {
      // The server's message, verbatim: it says what is wrong with the module.
      replace(result, errorBox(err, 'Upload'));
    } finally {
      button.disabled = false;
    }
  });
  return form;
}

export async function list(ctx) {
  ctx.setTitle('Policies');
  const body = h('div', {}, loading('policies'));
  append(ctx.main, adminNav('policies'), h('h1', { text: 'Policies' }),
    h('p', { class: 'lead', text: 'WebAssembly policy modules. Built-ins ship with the server; admins upload their own.' }),
    guarded(ctx, 'admin', 'Uploading or deleting a policy', () => uploadForm(ctx)),
    body);
  const data = await api('/policies', { signal: ctx.signal });
  if (data.items.length === 0) {
    replace(body, empty('No policies are registered.'));
    return;
  }
  const mayAdmin = allowed(ctx, 'admin');
  replace(body, h('h2', { text: `Registered policies (${data.items.length})` }), table({
    caption: 'Every policy',
    hiddenCaption: true,
    columns: ['Name', 'Version', 'Kind', 'Extension points', 'ABI', 'Size', 'Digest', 'Description and arguments', mayAdmin ? 'Actions' : null].filter(Boolean),
    className: 'policies cards',
    rows: data.items.map((p) => h('tr', { dataset: { policy: p.name } },
      h('th', { scope: 'row', 'data-label': 'Name' }, p.name, p.loaded === false ? [' ', badge('not loaded')] : null),
      h('td', { 'data-label': 'Version', text: p.version }),
      h('td', { 'data-label': 'Kind' }, badge(p.builtin ? 'built-in' : 'uploaded')),
      h('td', { 'data-label': 'Extension points', text: (p.extensionPoints ?? []).join(', ') }),
      h('td', { 'data-label': 'ABI', text: p.abiVersion }),
      h('td', { class: 'num', 'data-label': 'Size', text: formatBytes(p.sizeBytes) }),
      h('td', { 'data-label': 'Digest' }, h('code', { title: p.digest, text: (p.digest ?? '').slice(0, 12) })),
      h('td', { class: 'description', 'data-label': 'Description' }, h('p', { text: p.description }),
        h('details', { class: 'policy-args' }, h('summary', { text: `Arguments of ${p.name}` }), argsTable(p))),
      mayAdmin ? h('td', { 'data-label': 'Actions', class: 'row-actions' }, p.builtin ? h('span', { class: 'help', text: 'Built-in: cannot be deleted' })
        : h('button', {
          type: 'button', class: 'small danger', text: 'Delete', 'aria-label': `Delete policy ${p.name}`,
          onclick: async () => {
            if (!await confirmAction({ title: `Delete policy ${p.name}?`, message: 'Profiles that enable it must stop using it first; the server refuses otherwise.', confirm: 'Delete', danger: true })) return;
            try {
              await api(`/policies/${encodeURIComponent(p.name)}`, { method: 'DELETE' });
              ctx.flash(`Policy ${p.name} deleted.`);
              ctx.reload();
            } catch (err) {
              body.prepend(errorBox(err, `Deleting ${p.name}`));
            }
          },
        })) : null)),
  }));
}
