// Webhooks (admin): every hook with its state (enabled, or disabled after failed deliveries and
// why), a test delivery and re-enabling, and each hook's newest deliveries. Hooks are created
// over the API (POST /api/v1/webhooks): their secret belongs to the receiver's configuration.
//
// Owns: the hooks table and the deliveries tables. Must not: show or keep a secret (the API
// never returns one).

import { api } from '../api.js';
import {
  append, badge, empty, errorBox, h, loading, replace, table, time,
} from '../dom.js';
import { adminNav, guarded } from './admin-kit.js';

/** Deliveries shown per hook. */
const RECENT = 10;

export async function page(ctx) {
  ctx.setTitle('Webhooks');
  const body = h('section', { 'aria-labelledby': 'webhooks-title' },
    h('h2', { id: 'webhooks-title', text: 'Hooks' }), loading('webhooks'));
  append(ctx.main, adminNav('admin/webhooks'), h('h1', { text: 'Webhooks' }),
    h('p', { class: 'lead', text: 'Portals registered with POST /api/v1/webhooks get signed POSTs of runs, proposals, approvals, pod migration phases and cluster connections, retried until delivered.' }));
  const content = guarded(ctx, 'admin', 'Managing webhooks', () => body);
  append(ctx.main, content);
  if (!body.isConnected) return;

  async function act(path, done, what) {
    try {
      await api(path, { method: 'POST' });
      ctx.flash(done);
      await draw();
    } catch (err) {
      body.insertBefore(errorBox(err, what), body.children[1] ?? null);
    }
  }

  async function draw() {
    const data = await api('/webhooks', { signal: ctx.signal });
    const heading = body.firstChild;
    if (!data.items.length) {
      replace(body, heading, empty('No webhooks. Create one with POST /api/v1/webhooks (see docs/api.md, Webhooks).'));
      return;
    }
    const recent = await Promise.all(data.items.map((w) => api(`/webhooks/${w.id}/deliveries?limit=${RECENT}`, { signal: ctx.signal })));
    replace(body, heading, table({
      caption: 'Every webhook', hiddenCaption: true, className: 'webhooks',
      columns: ['URL', 'Events', 'State', 'Failures in a row', 'Last delivery', 'Actions'],
      rows: data.items.map((w) => h('tr', { dataset: { id: String(w.id) } },
        h('th', { scope: 'row' }, h('code', { text: w.url }), w.description ? h('p', { class: 'help', text: w.description }) : null),
        h('td', { text: w.events.join(', ') }),
        h('td', {}, w.enabled ? badge('enabled') : [badge('disabled'), h('p', { class: 'help', text: w.disabledReason ?? '' })]),
        h('td', { text: String(w.consecutiveFailures) }),
        h('td', {}, w.lastDeliveryAt ? [time(w.lastDeliveryAt), ' ', badge(w.lastStatus)] : '—'),
        h('td', { class: 'row-actions' },
          h('button', {
            type: 'button', class: 'small', text: 'Send test', 'aria-label': `Send a test delivery to ${w.url}`,
            onclick: () => act(`/webhooks/${w.id}/test`, `Test delivery queued for ${w.url}.`, 'Sending a test delivery'),
          }),
          w.enabled ? null : h('button', {
            type: 'button', class: 'small', text: 'Enable', 'aria-label': `Enable the webhook to ${w.url}`,
            onclick: () => act(`/webhooks/${w.id}/enable`, `Webhook to ${w.url} enabled.`, 'Enabling the webhook'),
          })))),
    }),
    data.items.map((w, i) => h('section', { 'aria-labelledby': `deliveries-${w.id}` },
      h('h3', { id: `deliveries-${w.id}`, text: `Newest deliveries to ${w.url}` }),
      recent[i].items.length ? table({
        caption: `Deliveries to ${w.url}`, hiddenCaption: true, className: 'deliveries',
        columns: ['Delivery', 'Event', 'Status', 'Attempts', 'Last answer', 'Created'],
        rows: recent[i].items.map((d) => h('tr', { dataset: { id: d.id } },
          h('th', { scope: 'row' }, h('code', { text: d.id })),
          h('td', { text: d.event }),
          h('td', {}, badge(d.status), d.nextAttemptAt ? [' next ', time(d.nextAttemptAt)] : null),
          h('td', { text: String(d.attempts) }),
          h('td', { text: d.lastError ?? (d.lastResponseStatus ? `HTTP ${d.lastResponseStatus}` : '—') }),
          h('td', {}, time(d.createdAt)))),
      }) : empty('No deliveries yet.'))));
  }
  await draw();
}
