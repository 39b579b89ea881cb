// Tokens (admin): create one (its secret shown once, with a copy button), list them, revoke
// one. The secret lives only in the page that created it: it is never stored or shown again.
//
// Owns: the token form, the one-time secret panel and the revoke confirmation.
// Must not: keep the secret anywhere (no storage, no URL, no flash message).

import { api } from '../api.js';
import {
  append, badge, empty, errorBox, h, loading, replace, table, time,
} from '../dom.js';
import { adminNav, confirmAction, guarded } from './admin-kit.js';

const ROLES = {
  viewer: 'viewer: reads everything',
  approver: 'approver: + approve/reject decisions, abort pod migrations',
  operator: 'operator: + push snapshots, start runs, schedules',
  admin: 'admin: everything',
};

/** [seconds, label]: an array, as numeric object keys would sort before ''. */
const EXPIRIES = [
  ['', 'never'],
  ['86400', '1 day'],
  ['604800', '7 days'],
  ['2592000', '30 days'],
  ['7776000', '90 days'],
  ['31536000', '1 year'],
];

function secretPanel(created) {
  const value = h('input', {
    id: 'new-token-secret', readonly: true, value: created.token, class: 'secret', spellcheck: 'false', autocomplete: 'off',
    'aria-describedby': 'new-token-help',
  });
  const copied = h('span', { class: 'muted', 'aria-live': 'polite' });
  return h('div', { class: 'card secret-panel', role: 'region', 'aria-labelledby': 'new-token-title' },
    h('h2', { id: 'new-token-title', tabindex: '-1', text: `Token ${created.name} created (${created.role})` }),
    h('p', { id: 'new-token-help', class: 'notice', text: 'Copy the token now: this is the only time it is shown. The server keeps only its hash.' }),
    h('div', { class: 'field' }, h('label', { for: 'new-token-secret', text: 'Token' }), value),
    h('div', { class: 'actions' },
      h('button', {
        type: 'button', text: 'Copy token',
        onclick: async () => {
          value.select();
          try {
            await navigator.clipboard.writeText(created.token);
            copied.textContent = 'Copied to the clipboard.';
          } catch {
            // No clipboard permission (e.g. plain http): the text is selected for Ctrl+C.
            copied.textContent = 'Selected: press Ctrl+C (⌘C) to copy.';
          }
        },
      }),
      copied),
    h('p', { class: 'help' }, created.expiresAt ? ['Expires ', time(created.expiresAt), '.'] : 'It never expires.'));
}

function createForm(ctx, onCreated) {
  const name = h('input', { id: 'token-name', required: true, maxlength: 100, 'aria-describedby': 'token-name-help' });
  const role = h('select', { id: 'token-role' }, Object.entries(ROLES).map(([v, t]) => h('option', { value: v, text: t })));
  const expiry = h('select', { id: 'token-expiry' }, EXPIRIES.map(([v, t]) => h('option', { value: v, text: t })));
  const result = h('div', { 'aria-live': 'polite' });
  const button = h('button', { type: 'submit', text: 'Create token' });
  const form = h('form', { class: 'card', 'aria-labelledby': 'create-token-title' },
    h('h2', { id: 'create-token-title', text: 'Create a token' }),
    h('div', { class: 'form-grid' },
      h('div', { class: 'field' }, h('label', { for: 'token-name', text: 'Name' }), name,
        h('p', { id: 'token-name-help', class: 'help', text: 'Who or what uses it (shown in the audit log); unique.' })),
      h('div', { class: 'field' }, h('label', { for: 'token-role', text: 'Role' }), role),
      h('div', { class: 'field' }, h('label', { for: 'token-expiry', text: 'Expires after' }), expiry)),
    h('div', { class: 'actions' }, button),
    result);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    button.disabled = true;
    replace(result);
    try {
      const body = { name: name.value.trim(), role: role.value };
      if (expiry.value) body.expiresIn = Number(expiry.value);
      const created = await api('/tokens', { method: 'POST', body });
      name.value = '';
      onCreated(created);
    } catch (err) {
      replace(result, errorBox(err, 'Creating the token'));
    } finally {
      button.disabled = false;
    }
  });
  return form;
}

export async function page(ctx) {
  ctx.setTitle('Tokens');
  const secret = h('div');
  const body = h('section', { 'aria-labelledby': 'tokens-title' }, h('h2', { id: 'tokens-title', text: 'Tokens' }), loading('tokens'));
  append(ctx.main, adminNav('admin/tokens'), h('h1', { text: 'API tokens' }),
    h('p', { class: 'lead', text: 'Every API call (and this UI) uses a bearer token with a role. Revoking a token stops it at once.' }));
  const content = guarded(ctx, 'admin', 'Managing tokens', () => h('div', {},
    secret,
    createForm(ctx, (created) => {
      replace(secret, secretPanel(created));
      secret.querySelector('h2').focus();
      ctx.flash(`Token ${created.name} created.`);
      draw();
    }),
    body));
  append(ctx.main, content);
  if (!body.isConnected) return;

  async function draw() {
    const data = await api('/tokens', { signal: ctx.signal });
    const heading = body.firstChild;
    if (!data.items.length) {
      replace(body, heading, empty('No tokens.'));
      return;
    }
    replace(body, heading, table({
      caption: 'Every token', hiddenCaption: true, className: 'tokens cards',
      columns: ['Name', 'Role', 'Origin', 'Created by', 'Created', 'Expires', 'Actions'],
      rows: data.items.map((t) => h('tr', { dataset: { id: String(t.id) } },
        h('th', { scope: 'row', 'data-label': 'Name', text: t.name }),
        h('td', { 'data-label': 'Role' }, badge(t.role)),
        h('td', { 'data-label': 'Origin', text: t.origin }),
        h('td', { 'data-label': 'Created by', text: t.createdBy ?? '—' }),
        h('td', { 'data-label': 'Created' }, time(t.createdAt)),
        h('td', { 'data-label': 'Expires' }, t.expiresAt ? time(t.expiresAt) : 'never', t.expired ? [' ', badge('expired')] : null),
        h('td', { 'data-label': 'Actions', class: 'row-actions' }, t.origin === 'env'
          ? h('span', { class: 'help', text: 'From REBALANCER_ADMIN_TOKEN: cannot be revoked here' })
          : h('button', {
            type: 'button', class: 'small danger', text: 'Revoke', 'aria-label': `Revoke token ${t.name}`,
            onclick: async () => {
              if (!await confirmAction({ title: `Revoke token ${t.name}?`, message: 'It stops working at once; whoever uses it gets 401.', confirm: 'Revoke', danger: true })) return;
              try {
                await api(`/tokens/${t.id}`, { method: 'DELETE' });
                ctx.flash(`Token ${t.name} revoked.`);
                await draw();
              } catch (err) {
                body.insertBefore(errorBox(err, `Revoking ${t.name}`), body.children[1] ?? null);
              }
            },
          })))),
    }));
  }
  await draw();
}
