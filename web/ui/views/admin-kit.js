// Shared pieces of the administration views: what the signed-in role may do (from `ctx.me`, the
// whoami answer) and the reason shown where an action is withheld; raw API calls for bodies
// that are not JSON (a .wasm upload, YAML in and out); field errors of a 422 listed with their
// path; a confirmation dialog.
//
// Owns: the mapping from an administration action to the ability (`ctx.me.can.*`) and the role
// that grants it.
// Must not: decide access itself: the server's answer (403) stays the authority, and without
// `ctx.me` every action is offered.

import { ApiError, getToken } from '../api.js';
import { h } from '../dom.js';
import { allowed as mayDo } from '../session.js';

/** Ability (a key of whoami's `can`) and the roles that have it, per kind of action. */
const NEEDS = {
  admin: { ability: 'admin', roles: 'the admin role' },
  run: { ability: 'run', roles: 'the operator or admin role' },
};

/** Whether the session may take an action of `kind` (`admin`, `run`); true when unknown. */
export function allowed(ctx, kind) {
  return mayDo(ctx.me, NEEDS[kind].ability);
}

/** Why an action is withheld, naming the token, its role and the role needed. */
export function reason(ctx, kind, what) {
  const me = ctx.me ?? {};
  return `${what} needs ${NEEDS[kind].roles}; you are signed in as ${me.name ?? 'this token'} with the ${me.role ?? 'current'} role.`;
}

/**
 * `content` when the session may take actions of `kind`, else a note saying why they are not
 * offered (the controls are left out, not merely disabled).
 */
export function guarded(ctx, kind, what, content) {
  if (allowed(ctx, kind)) return typeof content === 'function' ? content() : content;
  return h('p', { class: 'role-note', role: 'note' }, h('strong', { text: 'Read-only: ' }), reason(ctx, kind, what));
}

/**
 * Call the API with a body that is not JSON or for an answer that is not JSON. Returns
 * `{status, text, type}`; a failure throws ApiError with the server's code, message and details.
 */
export async function apiRaw(path, { method = 'GET', body, contentType, accept = 'application/json', signal } = {}) {
  const headers = { Accept: accept };
  const token = getToken();
  if (token) headers.Authorization = `Bearer ${token}`;
  if (contentType) headers['Content-Type'] = contentType;
  let response;
  try {
    response = await fetch(`/api/v1${path}`, { method, headers, body, signal, credentials: 'omit', cache: 'no-store' });
  } catch (err) {
    if (err?.name === 'AbortError') throw err;
    throw new ApiError(0, 'network_error', `The server could not be reached (${err?.message ?? err}). Is it running?`);
  }
  const text = await response.text();
  if (!response.ok) {
    let data = null;
    try { data = JSON.parse(text); } catch { data = null; }
    if (data && typeof data.message === 'string') throw new ApiError(response.status, data.code ?? 'error', data.message, data.details);
    throw new ApiError(response.status, 'http_error', `${response.status} ${response.statusText}`.trim());
  }
  return { status: response.status, text, type: response.headers.get('content-type') ?? '' };
}

/** The `details.errors` of a 422 (`[{field, message}]`), or []. */
export function fieldProblems(err) {
  const errors = err?.details?.errors;
  return Array.isArray(errors) ? errors.filter((e) => e && typeof e.message === 'string') : [];
}

/**
 * A list of field errors, each with its path; `goTo(field)` (optional) adds a button that shows
 * the field in the editor.
 */
export function problemList(err, { title, goTo } = {}) {
  const problems = fieldProblems(err);
  return h('div', { class: 'error field-errors', role: 'alert' },
    h('p', { class: 'error-title' }, h('strong', { text: title ?? `Refused (${err?.status ?? 'error'}): ${problems.length} problem(s)` })),
    h('p', { class: 'error-message', text: err?.message ?? String(err) }),
    err?.code && h('p', { class: 'error-code' }, 'Code: ', h('code', { text: err.code })),
    h('ol', { class: 'problems' }, problems.map((p) => h('li', { dataset: { field: p.field } },
      h('code', { class: 'problem-path', text: p.field || '(the whole document)' }), ' ',
      h('span', { class: 'problem-message', text: p.message }),
      goTo && p.field ? [' ', goTo(p.field)] : null))));
}

/** Ask before something that cannot be undone; resolves true when confirmed. */
export function confirmAction({ title, message, confirm = 'Confirm', danger = false }) {
  return new Promise((resolve) => {
    const titleId = `confirm-${Math.random().toString(36).slice(2)}`;
    const dialog = h('dialog', { class: 'dialog', 'aria-labelledby': titleId },
      h('h2', { id: titleId, text: title }),
      h('p', { text: message }));
    const done = (value) => {
      dialog.close();
      dialog.remove();
      resolve(value);
    };
    dialog.appendChild(h('div', { class: 'actions' },
      h('button', { type: 'button', class: 'secondary', text: 'Cancel', onclick: () => done(false) }),
      h('button', { type: 'button', class: danger ? 'danger' : null, text: confirm, onclick: () => done(true) })));
    dialog.addEventListener('cancel', (e) => { e.preventDefault(); done(false); });
    document.body.appendChild(dialog);
    dialog.showModal();
  });
}

/** Comma- or newline-separated text as a list of non-empty trimmed items. */
export function splitList(text) {
  return String(text ?? '').split(/[,\n]/).map((s) => s.trim()).filter(Boolean);
}

/** Sub-navigation of the administration pages. */
export function adminNav(current) {
  const pages = [
    ['admin', 'Overview'], ['admin/tokens', 'Tokens'], ['admin/audit', 'Audit log'], ['admin/schedules', 'Schedules'],
    ['admin/arbitration', 'Arbitration'], ['admin/retention', 'Retention'], ['admin/webhooks', 'Webhooks'], ['policies', 'Policies'], ['profiles', 'Profiles'],
  ];
  return h('nav', { class: 'subnav', 'aria-label': 'Administration' }, h('ul', {}, pages.map(([path, text]) => h('li', {},
    h('a', { href: `#/${path}`, text, 'aria-current': path === current ? 'page' : null })))));
}
