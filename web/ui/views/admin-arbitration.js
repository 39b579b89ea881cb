// Arbitration: the knobs pod migrations are admitted, rate-limited and started with
// (Koordinator's MigrationControllerArgs), globally and per cluster (a cluster's own knobs, or
// the global ones). Everyone reads them; admins change them. A refused value is shown at its
// field (the server's `details.errors`).
//
// Owns: the knobs form (every field of ArbitrationConfig) used for the global and each
// cluster's knobs.
// Must not: default or validate knobs: left-out fields take the server's defaults.

import { api } from '../api.js';
import {
  append, badge, errorBox, h, loading, replace, route, table,
} from '../dom.js';
import {
  adminNav, allowed, confirmAction, fieldProblems, guarded, problemList,
} from './admin-kit.js';

/** The knobs the form edits, in order: [field, label, kind, help]. */
const KNOBS = [
  ['maxMigratingGlobally', 'Running pod migrations, cluster-wide', 'optional-int', 'Empty: no cap.'],
  ['maxMigratingPerNode', 'Running per source node', 'int', '0: unlimited. Default 2.'],
  ['maxMigratingPerNamespace', 'Running per namespace', 'optional-int', 'Empty: no cap.'],
  ['maxMigratingPerWorkload', 'Running per workload', 'int-or-percent', 'A count or a percentage (10%). Empty: 1 below 4 replicas, 2 for 4–10, 10% above.'],
  ['maxUnavailablePerWorkload', 'Unavailable per workload', 'int-or-percent', 'Same rule as above when empty.'],
  ['skipCheckExpectedReplicas', 'Skip the expected-replicas check', 'bool', 'Do not refuse pods of workloads whose replicas equal 1, maxMigrating or maxUnavailable.'],
  ['evictQPS', 'Evictions per second', 'number', 'Over all pod migrations; above 0. Default 10.'],
  ['evictBurst', 'Eviction burst', 'int', 'At least 1.'],
  ['defaultJobMode', 'Mode of new pod migrations', 'mode', 'ReservationFirst reserves room before evicting.'],
  ['defaultJobTTL', 'Time to live of new pod migrations', 'text', 'Go duration (5m, 1h30m); 0 turns it off.'],
  ['objectLimiters', 'Object limiters (JSON)', 'json', 'Token buckets per workload and per namespace: {"workload": {"duration": "5m", "maxMigrating": null, "burst": 0}, "namespace": null}.'],
];

function control(id, kind, value, readOnly) {
  // Read-only: text stays selectable (readonly); only the choices are disabled.
  const common = { id, name: id.split('--').pop(), readonly: readOnly || null, 'aria-describedby': `${id}-help ${id}-error` };
  const choice = { ...common, readonly: null, disabled: readOnly || null };
  switch (kind) {
    case 'bool': return h('input', { ...choice, type: 'checkbox', checked: Boolean(value) });
    case 'mode': return h('select', choice, ['ReservationFirst', 'EvictDirectly'].map((m) => h('option', { value: m, text: m, selected: m === value })));
    case 'json': {
      const t = h('textarea', { ...common, rows: 5, class: 'code-editor', spellcheck: 'false' });
      t.value = JSON.stringify(value ?? null, null, 2);
      return t;
    }
    case 'number': return h('input', { ...common, type: 'number', step: 'any', min: 0, value: value ?? '' });
    case 'int':
    case 'optional-int': return h('input', { ...common, type: 'number', step: 1, min: 0, value: value ?? '' });
    default: return h('input', { ...common, value: value ?? '' });
  }
}

function read(form, prefix) {
  const out = {};
  for (const [field, , kind] of KNOBS) {
    const el = form.querySelector(`#${prefix}--${field}`);
    const v = el.value.trim?.() ?? el.value;
    if (kind === 'bool') out[field] = el.checked;
    else if (kind === 'json') {
      try {
        out[field] = JSON.parse(el.value);
      } catch (e) {
        const err = new Error(`objectLimiters is not JSON: ${e.message}`);
        err.status = 400;
        err.details = { errors: [{ field, message: `not JSON: ${e.message}` }] };
        throw err;
      }
    } else if (kind === 'optional-int') out[field] = v === '' ? null : Number(v);
    else if (kind === 'int' || kind === 'number') out[field] = v === '' ? undefined : Number(v);
    else if (kind === 'int-or-percent') out[field] = v === '' ? null : (/^\d+$/.test(v) ? Number(v) : v);
    else out[field] = v;
  }
  return out;
}

/**
 * A form of every knob of `config`. `save(body)` answers the knobs now in force; `extra` are
 * more buttons. Problems from the server are shown at their field and listed.
 */
function knobsForm({ prefix, title, config, readOnly, save, extra = [] }) {
  const result = h('div', { 'aria-live': 'polite' });
  const fields = KNOBS.map(([field, label, kind, help]) => {
    const id = `${prefix}--${field}`;
    const c = control(id, kind, config[field], readOnly);
    return h('div', { class: `field${kind === 'bool' ? ' checkbox' : ''}${kind === 'json' ? ' wide' : ''}`, dataset: { field } },
      kind === 'bool' ? [c, h('label', { for: id, text: label })] : [h('label', { for: id, text: label }), c],
      h('p', { id: `${id}-help`, class: 'help', text: help }),
      h('p', { id: `${id}-error`, class: 'field-error', 'aria-live': 'polite' }));
  });
  const form = h('form', { class: 'card knobs', 'aria-labelledby': `${prefix}-title` },
    h('h3', { id: `${prefix}-title`, text: title }),
    h('div', { class: 'form-grid' }, fields),
    readOnly ? null : h('div', { class: 'actions' }, h('button', { type: 'submit', text: 'Save' }), extra),
    result);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    for (const e of form.querySelectorAll('.field-error')) e.textContent = '';
    for (const e of form.querySelectorAll('[aria-invalid]')) e.removeAttribute('aria-invalid');
    try {
      await save(read(form, prefix));
      replace(result, h('p', { class: 'ok', text: 'Saved: these knobs are now in force.' }));
    } catch (err) {
      for (const p of fieldProblems(err)) {
        const top = p.field.split(/[.[]/)[0];
        const slot = form.querySelector(`#${prefix}--${top}-error`);
        if (slot) {
          slot.textContent = `${p.field}: ${p.message}`;
          form.querySelector(`#${prefix}--${top}`)?.setAttribute('aria-invalid', 'true');
        }
      }
      replace(result, fieldProblems(err).length ? problemList(err) : errorBox(err, 'Saving'));
    }
  });
  return form;
}

export async function page(ctx) {
  ctx.setTitle('Arbitration');
  const global = h('section', { 'aria-labelledby': 'global-title' }, h('h2', { id: 'global-title', text: 'Global knobs' }), loading('the knobs'));
  const perCluster = h('section', { 'aria-labelledby': 'clusters-title' }, h('h2', { id: 'clusters-title', text: 'Per cluster' }), loading('the clusters'));
  append(ctx.main, adminNav('admin/arbitration'), h('h1', { text: 'Arbitration' }),
    h('p', { class: 'lead', text: 'How many pod migrations run at once, how fast evictions go, and how new pod migrations start. A cluster follows the global knobs unless it has its own.' }),
    guarded(ctx, 'admin', 'Changing arbitration knobs', null), global, perCluster);
  const readOnly = !allowed(ctx, 'admin');
  const [config, clusters] = await Promise.all([
    api('/arbitration', { signal: ctx.signal }),
    api('/clusters', { signal: ctx.signal }),
  ]);
  replace(global, global.firstChild, knobsForm({
    prefix: 'global', title: 'Knobs of every cluster without its own', config, readOnly,
    save: async (body) => {
      await api('/arbitration', { method: 'PUT', body });
      ctx.flash('Global arbitration knobs saved.');
    },
  }));

  const editor = h('div', { id: 'cluster-knobs' });
  const drawClusters = async () => {
    const rows = await Promise.all(clusters.items.map((c) => api(`/clusters/${encodeURIComponent(c.name)}/arbitration`, { signal: ctx.signal })
      .catch((err) => ({ cluster: c.name, error: err }))));
    replace(perCluster, perCluster.firstChild, rows.length ? table({
      caption: 'Knobs in force per cluster', hiddenCaption: true, className: 'arbitration cards',
      columns: ['Cluster', 'Source', 'Per node', 'Evictions/s', 'Mode', 'Actions'],
      rows: rows.map((r) => h('tr', { dataset: { cluster: r.cluster } },
        h('th', { scope: 'row', 'data-label': 'Cluster' }, h('a', { href: route('clusters', r.cluster), text: r.cluster })),
        r.error ? h('td', { colspan: 5 }, errorBox(r.error)) : [
          h('td', { 'data-label': 'Source' }, badge(r.source === 'cluster' ? 'own' : 'global')),
          h('td', { class: 'num', 'data-label': 'Per node', text: r.config.maxMigratingPerNode || 'unlimited' }),
          h('td', { class: 'num', 'data-label': 'Evictions/s', text: r.config.evictQPS }),
          h('td', { 'data-label': 'Mode', text: r.config.defaultJobMode }),
          h('td', { 'data-label': 'Actions', class: 'row-actions' },
            h('button', {
              type: 'button', class: 'small secondary', text: readOnly ? 'Show' : 'Edit', 'aria-label': `${readOnly ? 'Show' : 'Edit'} the knobs of cluster ${r.cluster}`,
              onclick: () => openCluster(r),
            })),
        ])),
    }) : h('p', { class: 'help', text: 'No clusters.' }), editor);
  };
  const openCluster = (r) => {
    const prefix = `cluster-${r.cluster.replace(/[^A-Za-z0-9_-]/g, '_')}`;
    const form = knobsForm({
      prefix,
      title: `Cluster ${r.cluster} (${r.source === 'cluster' ? 'its own knobs' : 'now following the global knobs; saving gives it its own'})`,
      config: r.config,
      readOnly,
      save: async (body) => {
        await api(`/clusters/${encodeURIComponent(r.cluster)}/arbitration`, { method: 'PUT', body });
        ctx.flash(`Cluster ${r.cluster} has its own arbitration knobs now.`);
        await drawClusters();
      },
      extra: r.source === 'cluster' ? [h('button', {
        type: 'button', class: 'secondary', text: 'Follow the global knobs',
        onclick: async () => {
          if (!await confirmAction({ title: `Drop the knobs of ${r.cluster}?`, message: 'The cluster follows the global knobs again.', confirm: 'Follow global' })) return;
          try {
            await api(`/clusters/${encodeURIComponent(r.cluster)}/arbitration`, { method: 'DELETE' });
            ctx.flash(`Cluster ${r.cluster} follows the global knobs.`);
            replace(editor);
            await drawClusters();
          } catch (err) {
            editor.prepend(errorBox(err, 'Dropping the cluster knobs'));
          }
        },
      })] : [],
    });
    replace(editor, form);
    form.querySelector('h3').setAttribute('tabindex', '-1');
    form.querySelector('h3').focus();
  };
  await drawClusters();
}
