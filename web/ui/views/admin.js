// The administration overview: every administration page, what it is for, and whether the
// signed-in role may change it there (reading is open to every role but tokens).
//
// Owns: the list of administration pages. Must not: fetch anything.

import { append, h } from '../dom.js';
import { adminNav, allowed } from './admin-kit.js';

const SECTIONS = [
  ['#/policies', 'Policies', 'Upload a WebAssembly policy; see each policy\'s arguments and defaults.', 'admin'],
  ['#/profiles', 'Profiles', 'Import, edit and export DeschedulerPolicy documents as YAML; auto-approve rules.', 'admin'],
  ['#/admin/schedules', 'Schedules', 'Runs every so often or after a cluster changes.', 'run'],
  ['#/admin/arbitration', 'Arbitration', 'How many pod migrations run at once and how fast evictions go, globally and per cluster.', 'admin'],
  ['#/admin/retention', 'Retention', 'How long history is kept.', 'admin'],
  ['#/admin/webhooks', 'Webhooks', 'Portals told of changes: each hook\'s state, a test delivery, re-enabling, recent deliveries.', 'admin'],
  ['#/admin/tokens', 'Tokens', 'Create (the secret is shown once), list and revoke API tokens.', 'admin'],
  ['#/admin/audit', 'Audit log', 'Who changed what, when; filter by actor, action, object and time.', null],
];

export async function page(ctx) {
  ctx.setTitle('Administration');
  const me = ctx.me;
  append(ctx.main, adminNav('admin'), h('h1', { text: 'Administration' }),
    me ? h('p', { class: 'lead', text: `Signed in as ${me.name} (${me.role}).` }) : null,
    h('ul', { class: 'admin-sections' }, SECTIONS.map(([href, title, text, kind]) => {
      const may = kind === null || allowed(ctx, kind);
      const note = kind === null ? 'Every role reads it.'
        : may ? 'You may change it.'
          : `Read-only for you: changing it needs the ${kind === 'run' ? 'operator or admin' : 'admin'} role.`;
      return h('li', { class: 'card' },
        h('h2', {}, h('a', { href, text: title })),
        h('p', { text }),
        h('p', { class: may ? 'help' : 'role-note', text: href === '#/admin/tokens' && !may ? 'Only admins see tokens.' : note }));
    })));
}
