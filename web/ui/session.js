// Who is signed in: `GET /api/v1/whoami` (token name, role, clusters, expiry, and what the role
// may do), the header's "name · role · expiry" line, and the one place that decides whether an
// action is offered and, when not, says why.
//
// Owns: the `me` object views get as `ctx.me`, `allowed(me, action)` and `whyNot(me, action)`.
// Must not: enforce anything. The server decides; this only keeps the UI from offering what the
// server would refuse with 403, and says which role would be needed.

import { api } from './api.js';
import { h, replace } from './dom.js';

/**
 * What each `can` flag of whoami means, and which roles hold it (server/src/http/auth.rs: roles
 * are not ranked; admin may do everything).
 */
export const ACTIONS = {
  read: { verb: 'read', roles: 'any role' },
  approve: { verb: 'approve or reject decisions', roles: 'the approver or admin role' },
  run: { verb: 'start runs', roles: 'the operator or admin role' },
  abort: { verb: 'abort pod migrations', roles: 'the approver or admin role' },
  admin: { verb: 'change administration settings', roles: 'the admin role' },
};

/** Fetch the signed-in token's identity (`token` to check one before storing it). */
export async function whoami({ token, signal } = {}) {
  return api('/whoami', { token, signal });
}

/**
 * May `me` do `action` (a key of ACTIONS)? An unknown identity (no whoami answer) offers
 * everything and lets the server's 403 explain.
 */
export function allowed(me, action) {
  if (!me?.can) return true;
  return Boolean(me.can[action]);
}

/** Why `me` may not do `action`, in words (null when allowed). */
export function whyNot(me, action) {
  if (allowed(me, action)) return null;
  const what = ACTIONS[action] ?? { verb: action, roles: 'another role' };
  return `Your token "${me.name}" has the ${me.role} role, which may not ${what.verb}: that needs ${what.roles}.`;
}

/** A notice saying what the role may not do here (null when it may). */
export function roleNotice(me, action, extra = '') {
  const reason = whyNot(me, action);
  if (!reason) return null;
  return h('p', { class: 'notice role-notice', 'data-action': action, text: extra ? `${reason} ${extra}` : reason });
}

/** "in 3 days", "in 5 h", "expired" for an RFC 3339 expiry. */
export function expiryText(expiresAt, now = Date.now()) {
  if (!expiresAt) return 'never expires';
  const left = new Date(expiresAt).getTime() - now;
  if (!Number.isFinite(left)) return `expires ${expiresAt}`;
  if (left <= 0) return 'expired';
  const minutes = Math.round(left / 60000);
  if (minutes < 120) return `expires in ${minutes} min`;
  const hours = Math.round(minutes / 60);
  if (hours < 48) return `expires in ${hours} h`;
  return `expires in ${Math.round(hours / 24)} days`;
}

/** Fill the header's identity line from `me` (or a plain "Signed in" without whoami). */
export function showIdentity(element, me) {
  if (!me) {
    replace(element, h('span', { text: 'Signed in' }));
    element.removeAttribute('title');
    return;
  }
  const clusters = Array.isArray(me.clusters) ? `clusters: ${me.clusters.join(', ')}` : 'all clusters';
  replace(element,
    h('span', { class: 'who-name', text: me.name }),
    h('span', { class: 'who-role', text: me.role }),
    h('span', { class: 'who-expiry', text: expiryText(me.expiresAt) }));
  element.title = `Token ${me.name}, role ${me.role}, ${clusters}${me.expiresAt ? `, expires at ${me.expiresAt}` : ''}`;
}
