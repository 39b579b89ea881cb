// Profiles: DeschedulerPolicy documents. Everyone reads them; admins import one (pasted or from
// a file), edit it as YAML, export it (the server's YAML, `Accept: application/yaml`), delete
// it, and edit its auto-approve rules. A refused document lists every problem at its field path
// next to the editor, with a button that shows the line.
//
// Owns: the YAML editor, locating a field path (`profiles[0].pluginConfig[1].args`) in YAML
// text, and the auto-approve rules form.
// Must not: parse or validate YAML itself: the server is the one validator.

import { api } from '../api.js';
import {
  append, empty, errorBox, facts, h, loading, replace, route, table, time,
} from '../dom.js';
import {
  adminNav, allowed, apiRaw, confirmAction, fieldProblems, guarded, problemList, splitList,
} from './admin-kit.js';

function pluginSets(profile) {
  return profile.document?.profiles ?? [];
}

function enabledPlugins(set) {
  const points = set.plugins ?? {};
  return Object.entries(points).flatMap(([point, v]) => (v?.enabled ?? []).map((name) => `${name} (${point})`));
}

/** `profiles[0].pluginConfig[1].args` → ['profiles', 0, 'pluginConfig', 1, 'args']. */
export function pathSegments(path) {
  const out = [];
  for (const part of String(path).split('.')) {
    const m = /^([^[\]]*)((?:\[\d+\])*)$/.exec(part);
    if (!m) { out.push(part); continue; }
    if (m[1]) out.push(m[1]);
    for (const idx of m[2].matchAll(/\[(\d+)\]/g)) out.push(Number(idx[1]));
  }
  return out;
}

const indentOf = (line) => line.length - line.trimStart().length;
const isBlank = (line) => !line.trim() || line.trimStart().startsWith('#');

/**
 * The 0-based line of `path` in block-style YAML `text` (what the server exports and people
 * write), or of the deepest part of it found; -1 when not even the first part is found.
 * Best effort: flow style (`{a: 1}`) is located at its parent key.
 */
export function lineOfPath(text, path) {
  const lines = text.split('\n');
  let start = 0;
  let end = lines.length;
  let found = -1;
  let parentIndent = -1;
  for (const seg of pathSegments(path)) {
    let hit = -1;
    if (typeof seg === 'number') {
      // The seg-th `- ` item at the shallowest item indentation of the block.
      let itemIndent = null;
      let seen = -1;
      for (let i = start; i < end; i += 1) {
        if (isBlank(lines[i])) continue;
        const trimmed = lines[i].trimStart();
        const ind = indentOf(lines[i]);
        if (!trimmed.startsWith('- ') && trimmed !== '-') continue;
        if (itemIndent === null) itemIndent = ind;
        if (ind !== itemIndent) continue;
        seen += 1;
        if (seen === seg) { hit = i; break; }
      }
      if (hit < 0) break;
      let stop = end;
      for (let i = hit + 1; i < end; i += 1) {
        if (isBlank(lines[i])) continue;
        if (indentOf(lines[i]) <= indentOf(lines[hit])) { stop = i; break; }
      }
      found = hit;
      parentIndent = indentOf(lines[hit]);
      start = hit;
      end = stop;
      // The item's first key sits on the `- ` line itself: search from it.
      continue;
    }
    const key = new RegExp(`^(\\s*(?:-\\s+)?)(["']?)${seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\2\\s*:`);
    for (let i = start; i < end; i += 1) {
      const m = key.exec(lines[i]);
      if (m && m[1].length > parentIndent) { hit = i; break; }
    }
    if (hit < 0) break;
    const keyIndent = key.exec(lines[hit])[1].length;
    let stop = end;
    for (let i = hit + 1; i < end; i += 1) {
      if (isBlank(lines[i])) continue;
      const ind = indentOf(lines[i]);
      const trimmed = lines[i].trimStart();
      // A list under a key may sit at the key's own indentation.
      if (ind < keyIndent || (ind === keyIndent && !trimmed.startsWith('- '))) { stop = i; break; }
    }
    found = hit;
    parentIndent = keyIndent - 1;
    start = hit + 1;
    end = stop;
  }
  return found;
}

/** Select line `line` of a textarea and scroll it into view. */
function showLine(textarea, line) {
  const lines = textarea.value.split('\n');
  let from = 0;
  for (let i = 0; i < line; i += 1) from += lines[i].length + 1;
  textarea.focus();
  textarea.setSelectionRange(from, from + (lines[line]?.length ?? 0));
  const lineHeight = parseFloat(getComputedStyle(textarea).lineHeight) || 18;
  textarea.scrollTop = Math.max(0, (line - 3) * lineHeight);
}

/**
 * A YAML editor with its problems beside it. `save(text)` stores the document (and throws the
 * server's error); returns `{element, textarea, setProblems}`.
 */
function yamlEditor({ id, label, value = '', help, submitText, save, extra }) {
  const textarea = h('textarea', {
    id, rows: 22, spellcheck: 'false', autocomplete: 'off', class: 'code-editor', 'aria-describedby': `${id}-help ${id}-problems`,
  });
  textarea.value = value;
  const problems = h('div', { id: `${id}-problems`, class: 'editor-problems', 'aria-live': 'polite' });
  const button = h('button', { type: 'submit', text: submitText });
  const form = h('form', { class: 'editor-form' },
    h('div', { class: 'editor-grid' },
      h('div', { class: 'field editor' },
        h('label', { for: id, text: label }), textarea,
        h('p', { id: `${id}-help`, class: 'help', text: help })),
      problems),
    extra ?? null,
    h('div', { class: 'actions' }, button));
  const goTo = (field) => {
    const line = lineOfPath(textarea.value, field);
    if (line < 0) return null;
    return h('button', {
      type: 'button', class: 'small secondary', text: `Show line ${line + 1}`,
      'aria-label': `Show line ${line + 1}: ${field}`,
      onclick: () => showLine(textarea, line),
    });
  };
  const setProblems = (err) => {
    if (!err) { replace(problems); textarea.removeAttribute('aria-invalid'); return; }
    textarea.setAttribute('aria-invalid', 'true');
    replace(problems, fieldProblems(err).length ? problemList(err, { goTo }) : errorBox(err, 'Saving'));
  };
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    button.disabled = true;
    try {
      await save(textarea.value);
      setProblems(null);
    } catch (err) {
      if (err?.name !== 'AbortError') setProblems(err);
    } finally {
      button.disabled = false;
    }
  });
  return { element: form, textarea, setProblems };
}

async function putYaml(name, text) {
  const answer = await apiRaw(`/profiles/${encodeURIComponent(name)}`, {
    method: 'PUT', body: text, contentType: 'application/yaml',
  });
  return { status: answer.status, profile: JSON.parse(answer.text) };
}

const EXAMPLE = `apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
  - name: balance
    pluginConfig:
      - name: LowNodeUtilization
        args:
          thresholds: {cpu: 20, memory: 20, pods: 20}
          targetThresholds: {cpu: 70, memory: 70, pods: 70}
    plugins:
      balance:
        enabled: [LowNodeUtilization]
`;

function importForm(ctx) {
  const nameInput = h('input', {
    id: 'import-name', required: true, pattern: '[a-z0-9]([a-z0-9._\\-]{0,61}[a-z0-9])?', maxlength: 63, 'aria-describedby': 'import-name-help',
  });
  const file = h('input', { id: 'import-file', type: 'file', accept: '.yaml,.yml,.json,application/yaml,application/json' });
  let editor = null;
  file.addEventListener('change', async () => {
    const f = file.files?.[0];
    if (!f) return;
    editor.textarea.value = await f.text();
    if (!nameInput.value) nameInput.value = f.name.replace(/\.(ya?ml|json)$/i, '').toLowerCase().replace(/[^a-z0-9._-]/g, '-');
  });
  editor = yamlEditor({
    id: 'import-yaml',
    label: 'DeschedulerPolicy (YAML or JSON)',
    value: EXAMPLE,
    help: 'Paste a descheduler/v1alpha2 DeschedulerPolicy, or load it from a file. The server checks every plugin and its args; problems are listed with their path.',
    submitText: 'Import profile',
    extra: null,
    save: async (text) => {
      const name = nameInput.value.trim();
      if (!nameInput.reportValidity()) throw Object.assign(new Error('Give the profile a name.'), { status: 400 });
      const { status, profile } = await putYaml(name, text);
      ctx.flash(`Profile ${profile.name} ${status === 201 ? 'created' : 'replaced'}.`);
      location.hash = route('profiles', profile.name);
    },
  });
  const fields = h('div', { class: 'form-grid' },
    h('div', { class: 'field' }, h('label', { for: 'import-name', text: 'Profile name' }), nameInput,
      h('p', { id: 'import-name-help', class: 'help', text: 'a-z, 0-9, . _ -; an existing name is replaced.' })),
    h('div', { class: 'field' }, h('label', { for: 'import-file', text: 'Or load a file' }), file));
  editor.element.prepend(fields);
  return h('section', { class: 'card', 'aria-labelledby': 'import-title' },
    h('h2', { id: 'import-title', text: 'Import a profile' }), editor.element);
}

export async function list(ctx) {
  ctx.setTitle('Profiles');
  const body = h('div', {}, loading('profiles'));
  append(ctx.main, adminNav('profiles'), h('h1', { text: 'Profiles' }),
    h('p', { class: 'lead', text: 'A profile is one DeschedulerPolicy (descheduler/v1alpha2) document. Open one to see, export or edit it and its auto-approve rules.' }),
    body,
    guarded(ctx, 'admin', 'Importing or editing a profile', () => importForm(ctx)));
  const data = await api('/profiles', { signal: ctx.signal });
  if (data.items.length === 0) {
    replace(body, empty('No profiles are stored.'));
    return;
  }
  replace(body, table({
    caption: 'Every profile',
    hiddenCaption: true,
    className: 'profiles cards',
    columns: ['Name', 'Plugin sets', 'Enabled plugins', 'Warnings', 'Updated'],
    rows: data.items.map((p) => h('tr', {},
      h('th', { scope: 'row', 'data-label': 'Name' }, h('a', { href: route('profiles', p.name), text: p.name })),
      h('td', { 'data-label': 'Plugin sets', text: pluginSets(p).map((s) => s.name).join(', ') || '—' }),
      h('td', { class: 'description', 'data-label': 'Enabled plugins', text: pluginSets(p).flatMap(enabledPlugins).join(', ') || '—' }),
      h('td', { class: 'num', 'data-label': 'Warnings', text: (p.warnings ?? []).length }),
      h('td', { 'data-label': 'Updated' }, time(p.updatedAt)))),
  }));
}

async function download(name) {
  const answer = await apiRaw(`/profiles/${encodeURIComponent(name)}`, { accept: 'application/yaml' });
  const url = URL.createObjectURL(new Blob([answer.text], { type: 'application/yaml' }));
  const a = h('a', { href: url, download: `${name}.yaml`, hidden: true });
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
  return answer.text;
}

// ---- auto-approve rules ----------------------------------------------------------------------

function labelsText(selector) {
  return Object.entries(selector?.matchLabels ?? {}).map(([k, v]) => `${k}=${v}`).join(', ');
}

function ruleFieldset(rule, index, readOnly) {
  const id = (f) => `rule-${index}-${f}`;
  const input = (f, value, attrs = {}) => h('input', { id: id(f), name: f, value: value ?? '', readonly: readOnly || null, ...attrs });
  const exprs = rule.podSelector?.matchExpressions;
  return h('fieldset', { class: 'rule', dataset: { index: String(index) } },
    h('legend', { text: `Rule ${index + 1}${rule.name ? `: ${rule.name}` : ''}` }),
    h('div', { class: 'form-grid' },
      h('div', { class: 'field' }, h('label', { for: id('name'), text: 'Name' }), input('name', rule.name, { required: true, pattern: '[A-Za-z0-9._\\-]{1,63}' })),
      h('div', { class: 'field' }, h('label', { for: id('plugins'), text: 'Plugins (comma-separated; empty: any)' }), input('plugins', (rule.plugins ?? []).join(', '))),
      h('div', { class: 'field' }, h('label', { for: id('namespaces'), text: 'Namespaces (empty: any)' }), input('namespaces', (rule.namespaces ?? []).join(', '))),
      h('div', { class: 'field' }, h('label', { for: id('labels'), text: 'Pod labels (key=value, …)' }), input('labels', labelsText(rule.podSelector))),
      h('div', { class: 'field' }, h('label', { for: id('expressions'), text: 'Label expressions (JSON matchExpressions; optional)' }),
        h('textarea', { id: id('expressions'), name: 'expressions', rows: 2, class: 'code-editor', readonly: readOnly || null, text: exprs ? JSON.stringify(exprs) : '' }))),
    h('div', { class: 'rule-problems', 'aria-live': 'polite' }),
    readOnly ? null : h('div', { class: 'actions' },
      h('button', { type: 'button', class: 'small secondary', dataset: { act: 'up' }, text: 'Move up', 'aria-label': `Move up: rule ${index + 1}` }),
      h('button', { type: 'button', class: 'small secondary', dataset: { act: 'down' }, text: 'Move down', 'aria-label': `Move down: rule ${index + 1}` }),
      h('button', { type: 'button', class: 'small danger', dataset: { act: 'remove' }, text: 'Remove', 'aria-label': `Remove rule ${index + 1}` })));
}

/** The rule of a fieldset as the API takes it; throws naming the field for bad JSON. */
function ruleOf(fieldset, index) {
  const get = (f) => fieldset.querySelector(`[name="${f}"]`).value;
  const rule = { name: get('name').trim() };
  const plugins = splitList(get('plugins'));
  const namespaces = splitList(get('namespaces'));
  if (plugins.length) rule.plugins = plugins;
  if (namespaces.length) rule.namespaces = namespaces;
  const selector = {};
  const labels = splitList(get('labels'));
  if (labels.length) {
    selector.matchLabels = Object.fromEntries(labels.map((pair) => {
      const at = pair.indexOf('=');
      return at < 0 ? [pair, ''] : [pair.slice(0, at).trim(), pair.slice(at + 1).trim()];
    }));
  }
  const exprs = get('expressions').trim();
  if (exprs) {
    try {
      selector.matchExpressions = JSON.parse(exprs);
    } catch (e) {
      const err = new Error(`rules[${index}].podSelector.matchExpressions is not JSON: ${e.message}`);
      err.details = { errors: [{ field: `rules[${index}].podSelector.matchExpressions`, message: `not JSON: ${e.message}` }] };
      err.status = 400;
      throw err;
    }
  }
  if (Object.keys(selector).length) rule.podSelector = selector;
  return rule;
}

async function autoApproveSection(ctx, name) {
  const section = h('section', { 'aria-labelledby': 'rules-title', class: 'card' },
    h('h2', { id: 'rules-title', text: 'Auto-approve rules' }), loading('the rules'));
  const data = await api(`/profiles/${encodeURIComponent(name)}/auto-approve`, { signal: ctx.signal });
  const readOnly = !allowed(ctx, 'admin');
  let rules = data.rules.map((r) => ({ ...r }));
  const holder = h('div', { class: 'rules' });
  const result = h('div', { 'aria-live': 'polite' });
  const collect = () => [...holder.querySelectorAll('fieldset.rule')].map((f, i) => ruleOf(f, i));
  const draw = () => {
    replace(holder, rules.length ? rules.map((r, i) => ruleFieldset(r, i, readOnly))
      : h('p', { class: 'help', text: 'No rules: every proposal of this profile waits for a person.' }));
  };
  holder.addEventListener('click', (event) => {
    const act = event.target?.dataset?.act;
    if (!act) return;
    const fieldset = event.target.closest('fieldset.rule');
    const i = Number(fieldset.dataset.index);
    try { rules = collect(); } catch { /* keep the text as typed: rebuilt below from the last good rules */ }
    if (act === 'remove') rules.splice(i, 1);
    if (act === 'up' && i > 0) [rules[i - 1], rules[i]] = [rules[i], rules[i - 1]];
    if (act === 'down' && i < rules.length - 1) [rules[i + 1], rules[i]] = [rules[i], rules[i + 1]];
    draw();
  });
  const form = h('form', { 'aria-labelledby': 'rules-title' },
    h('p', { class: 'help', text: 'After every run of this profile, each proposal matching a rule (all its conditions; first match wins, in this order) is approved as auto-approve:<rule>. Dry runs are never auto-approved.' }),
    h('p', { class: 'muted', text: data.updatedAt ? `Last changed ${new Date(data.updatedAt).toLocaleString()}.` : 'Never set.' }),
    holder,
    readOnly ? null : h('div', { class: 'actions' },
      h('button', {
        type: 'button', class: 'secondary', text: 'Add a rule',
        onclick: () => {
          try { rules = collect(); } catch { /* keep */ }
          rules.push({ name: `rule-${rules.length + 1}` });
          draw();
          holder.querySelector('fieldset.rule:last-of-type input')?.focus();
        },
      }),
      h('button', { type: 'submit', text: 'Save rules' })),
    result);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    for (const p of holder.querySelectorAll('.rule-problems')) replace(p);
    let body;
    try {
      body = { rules: collect() };
      const saved = await api(`/profiles/${encodeURIComponent(name)}/auto-approve`, { method: 'PUT', body });
      rules = saved.rules;
      draw();
      replace(result, h('p', { class: 'ok', text: `Saved ${saved.rules.length} rule(s).` }));
      ctx.flash(`Auto-approve rules of ${name} saved.`);
    } catch (err) {
      // Each problem also at its rule.
      for (const p of fieldProblems(err)) {
        const m = /^rules\[(\d+)\]/.exec(p.field);
        const target = m && holder.querySelector(`fieldset.rule[data-index="${m[1]}"] .rule-problems`);
        if (target) target.appendChild(h('p', { class: 'field-error' }, h('code', { text: p.field }), ` ${p.message}`));
      }
      replace(result, fieldProblems(err).length ? problemList(err) : errorBox(err, 'Saving the rules'));
    }
  });
  draw();
  replace(section, section.firstChild,
    readOnly ? guarded(ctx, 'admin', 'Changing auto-approve rules', null) : null, form);
  return section;
}

export async function detail(ctx) {
  const { name } = ctx.params;
  ctx.setTitle(`Profile ${name}`);
  const body = h('div', {}, loading('the profile'));
  append(ctx.main, adminNav('profiles'),
    h('p', { class: 'crumbs' }, h('a', { href: '#/profiles', text: 'Profiles' }), ' / ', name),
    h('h1', { text: `Profile ${name}` }), body);
  const [p, yaml] = await Promise.all([
    api(`/profiles/${encodeURIComponent(name)}`, { signal: ctx.signal }),
    apiRaw(`/profiles/${encodeURIComponent(name)}`, { accept: 'application/yaml', signal: ctx.signal }),
  ]);
  const warnings = p.warnings ?? [];
  const mayAdmin = allowed(ctx, 'admin');
  const exportResult = h('span', { 'aria-live': 'polite', class: 'muted' });
  const actions = h('div', { class: 'actions' },
    allowed(ctx, 'run') ? h('a', { class: 'button', href: `#/runs?profile=${encodeURIComponent(name)}`, text: 'Start a run with this profile' }) : null,
    h('button', {
      type: 'button', class: 'secondary', id: 'export-yaml', text: 'Export YAML',
      onclick: async () => {
        try {
          await download(name);
          exportResult.textContent = `Downloaded ${name}.yaml.`;
        } catch (err) {
          replace(exportResult, errorBox(err, 'Export'));
        }
      },
    }),
    mayAdmin && name !== 'default' ? h('button', {
      type: 'button', class: 'danger', text: 'Delete profile',
      onclick: async () => {
        if (!await confirmAction({
          title: `Delete profile ${name}?`, confirm: 'Delete', danger: true,
          message: 'Its auto-approve rules, schedules and policy state go with it; its open proposals expire. Runs and decisions stay as history.',
        })) return;
        try {
          const gone = await api(`/profiles/${encodeURIComponent(name)}`, { method: 'DELETE' });
          ctx.flash(`Profile ${name} deleted (${gone.schedulesDeleted.length} schedule(s), ${gone.decisionsExpired} open proposal(s) expired).`);
          location.hash = '#/profiles';
        } catch (err) {
          actions.after(errorBox(err, 'Deleting the profile'));
        }
      },
    }) : null,
    exportResult);

  const editor = mayAdmin ? yamlEditor({
    id: 'profile-yaml',
    label: `DeschedulerPolicy of ${name} (YAML)`,
    value: yaml.text,
    help: 'Edit and save: the server checks the whole document and lists every problem with its path; nothing is stored until it is valid.',
    submitText: 'Save profile',
    save: async (text) => {
      const { profile } = await putYaml(name, text);
      ctx.flash(`Profile ${profile.name} saved.`);
      ctx.reload();
    },
  }) : null;

  replace(body,
    facts([
      ['Plugin sets', pluginSets(p).map((s) => s.name).join(', ') || '—'],
      ['Enabled plugins', pluginSets(p).flatMap(enabledPlugins).join(', ') || '—'],
      ['Created', time(p.createdAt)],
      ['Updated', time(p.updatedAt)],
    ]),
    actions,
    warnings.length ? h('section', { 'aria-labelledby': 'warnings-title' },
      h('h2', { id: 'warnings-title', text: 'Warnings' }),
      h('ul', {}, warnings.map((w) => h('li', {}, w.field ? [h('code', { text: w.field }), ': '] : null, w.message ?? String(w))))) : null,
    h('section', { 'aria-labelledby': 'document-title' },
      h('h2', { id: 'document-title', text: 'Document' }),
      editor ? editor.element : [
        guarded(ctx, 'admin', 'Editing a profile', null),
        h('pre', { class: 'document', tabindex: '0', 'aria-label': `DeschedulerPolicy of profile ${name}`, text: yaml.text }),
      ]),
    h('div', { id: 'rules-holder' }, loading('the auto-approve rules')));
  const rules = await autoApproveSection(ctx, name);
  replace(body.querySelector('#rules-holder'), rules);
}
