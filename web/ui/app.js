// The application shell: sign-in, who is signed in (session.js), the live updates (live.js),
// hash routing, navigation state and status messages.
// Views live in ./views/*.js and export `render(ctx)`; see `navigate()` for what ctx holds.

import { ApiError, api, clearToken, getToken, onUnauthorized, setToken } from './api.js';
import { errorBox, h, replace } from './dom.js';
import { createLive, viewLive } from './live.js';
import { showIdentity, whoami } from './session.js';
import * as clusters from './views/clusters.js';
import * as runs from './views/runs.js';
import * as decisions from './views/decisions.js';
import * as decision from './views/decision.js';
import * as migrations from './views/migrations.js';
import * as policies from './views/policies.js';
import * as profiles from './views/profiles.js';
import * as admin from './views/admin.js';
import * as adminTokens from './views/admin-tokens.js';
import * as adminAudit from './views/admin-audit.js';
import * as adminSchedules from './views/admin-schedules.js';
import * as adminArbitration from './views/admin-arbitration.js';
import * as adminRetention from './views/admin-retention.js';
import * as adminWebhooks from './views/admin-webhooks.js';

const main = document.getElementById('main');
const nav = document.getElementById('nav');
const session = document.getElementById('session');
const flashRegion = document.getElementById('flash');
const who = document.getElementById('who');
const live = createLive({
  indicator: document.getElementById('live'),
  // The events stream is refused (401): the token expired or was revoked meanwhile.
  onUnauthorized: () => {
    clearToken();
    showLogin(new ApiError(401, 'unauthorized', 'The server no longer accepts this token (it may have expired or been revoked).'));
  },
});
/** The whoami answer of the signed-in token (null until known, or when the server has none). */
let me = null;
let meLoaded = false;

/** Routes: path segments (`:x` captures) → view function. */
const ROUTES = [
  [['clusters'], clusters.list],
  [['clusters', ':name'], clusters.detail],
  [['clusters', ':name', 'nodes', ':node'], clusters.node],
  [['runs'], runs.list],
  [['runs', ':id'], runs.detail],
  [['decisions'], decisions.list],
  [['decisions', ':id'], decision.detail],
  [['pod-migrations'], migrations.list],
  [['pod-migrations', ':id'], migrations.detail],
  [['policies'], policies.list],
  [['profiles'], profiles.list],
  [['profiles', ':name'], profiles.detail],
  [['admin'], admin.page],
  [['admin', 'tokens'], adminTokens.page],
  [['admin', 'audit'], adminAudit.page],
  [['admin', 'schedules'], adminSchedules.page],
  [['admin', 'arbitration'], adminArbitration.page],
  [['admin', 'retention'], adminRetention.page],
  [['admin', 'webhooks'], adminWebhooks.page],
];

let current = null; // { controller, cleanups, live }
let flashTimer = null;

/** Show a short status message (announced politely to screen readers). */
export function flash(message, kind = 'ok') {
  clearTimeout(flashTimer);
  replace(flashRegion, h('p', { class: `flash-${kind}`, text: message }));
  flashTimer = setTimeout(() => replace(flashRegion), 8000);
}

function parseHash() {
  const raw = location.hash.startsWith('#/') ? location.hash.slice(2) : '';
  const [pathPart, queryPart = ''] = raw.split('?');
  const segments = pathPart.split('/').filter(Boolean).map((s) => {
    try {
      return decodeURIComponent(s);
    } catch {
      return s;
    }
  });
  return { segments, query: new URLSearchParams(queryPart) };
}

function match(segments) {
  for (const [pattern, view] of ROUTES) {
    if (pattern.length !== segments.length) continue;
    const params = {};
    let ok = true;
    pattern.forEach((part, i) => {
      if (part.startsWith(':')) params[part.slice(1)] = segments[i];
      else if (part !== segments[i]) ok = false;
    });
    if (ok) return { view, params };
  }
  return null;
}

function teardown() {
  if (!current) return;
  current.controller.abort();
  current.live.close();
  for (const fn of current.cleanups) fn();
  current = null;
}

/**
 * Load who is signed in (once per sign-in). A server without `GET /api/v1/whoami` (404) leaves
 * `me` null: every action is offered and the server's 403 explains.
 */
async function loadIdentity() {
  if (meLoaded) return;
  try {
    me = await whoami();
  } catch (err) {
    if (err?.status === 401) throw err;
    me = null;
  }
  meLoaded = true;
  showIdentity(who, me);
}

async function navigate({ focus = true } = {}) {
  if (!getToken()) {
    showLogin();
    return;
  }
  // Only `#/…` hashes are routes; `#main` (the skip link) just moves focus.
  if (location.hash && !location.hash.startsWith('#/')) return;
  const { segments, query } = parseHash();
  if (segments.length === 0) {
    location.replace('#/clusters');
    return;
  }
  teardown();
  try {
    await loadIdentity();
  } catch {
    return; // 401: onUnauthorized has shown the sign-in form.
  }
  showShell();
  for (const link of nav.querySelectorAll('a')) {
    if (link.dataset.section === segments[0]) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  const found = match(segments);
  const controller = new AbortController();
  const view = { controller, cleanups: [], live: viewLive(live) };
  current = view;
  replace(main);
  if (!found) {
    document.title = 'Not found · Rebalancer';
    replace(main, h('h1', { tabindex: '-1', text: 'Page not found' }),
      h('p', {}, 'There is no page at ', h('code', { text: location.hash }), '. ',
        h('a', { href: '#/clusters', text: 'Go to clusters' }), '.'));
    if (focus) main.querySelector('h1').focus();
    return;
  }
  const ctx = {
    main,
    params: found.params,
    query,
    signal: controller.signal,
    flash,
    /** The signed-in token's whoami answer (`{name, role, clusters, expiresAt, can}`), or null. */
    me,
    /** Live updates: `on(type, fn)` (removed when the user leaves the view), `stale`. */
    live: view.live,
    setTitle: (title) => { document.title = `${title} · Rebalancer`; },
    /** Render the current view again (fresh data), keeping focus where it is. */
    reload: () => navigate({ focus: false }),
    /** Register a function run when the user leaves the view (timers). */
    onLeave: (fn) => { if (current === view) view.cleanups.push(fn); else fn(); },
  };
  main.setAttribute('aria-busy', 'true');
  try {
    await found.view(ctx);
  } catch (err) {
    if (err?.name === 'AbortError' || controller.signal.aborted) return;
    // The view stopped half-way: its loading placeholders will never fill.
    for (const placeholder of main.querySelectorAll('.loading')) placeholder.remove();
    main.appendChild(errorBox(err));
  } finally {
    if (!controller.signal.aborted) main.setAttribute('aria-busy', 'false');
  }
  if (focus && !controller.signal.aborted) {
    const heading = main.querySelector('h1');
    if (heading) {
      heading.setAttribute('tabindex', '-1');
      heading.focus({ preventScroll: true });
    }
  }
}

function showShell() {
  nav.hidden = false;
  session.hidden = false;
  live.start();
}

function showLogin(reason) {
  teardown();
  live.stop();
  me = null;
  meLoaded = false;
  nav.hidden = true;
  session.hidden = true;
  document.title = 'Sign in · Rebalancer';
  const input = h('input', {
    id: 'token', name: 'token', type: 'password', autocomplete: 'off', spellcheck: 'false',
    required: true, 'aria-describedby': 'token-help',
  });
  const button = h('button', { type: 'submit', text: 'Sign in' });
  const result = h('div', { id: 'login-result', 'aria-live': 'polite' }, reason ? errorBox(reason) : null);
  const form = h('form', { class: 'card login', 'aria-labelledby': 'login-title' },
    h('h1', { id: 'login-title', text: 'Sign in to Rebalancer' }),
    h('label', { for: 'token', text: 'API token' }),
    input,
    h('p', { id: 'token-help', class: 'help' },
      'Every API call is made with this bearer token. The server prints an admin token once when it first starts, ',
      'or takes it from REBALANCER_ADMIN_TOKEN; admins create tokens for others with POST /api/v1/tokens. ',
      'The token is kept only in this browser tab (sessionStorage) until you log out or close the tab.'),
    h('div', { class: 'actions' }, button),
    result);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const token = input.value.trim();
    if (!token) return;
    button.disabled = true;
    replace(result, h('p', { class: 'state loading', text: 'Checking the token…' }));
    try {
      // whoami checks the token and says who it is; a server without it is asked for clusters.
      try {
        me = await whoami({ token });
      } catch (err) {
        if (!(err instanceof ApiError) || err.status !== 404) throw err;
        await api('/clusters', { token });
        me = null;
      }
      meLoaded = true;
      showIdentity(who, me);
      setToken(token);
      flash('Signed in.');
      replace(result);
      if (!location.hash.startsWith('#/')) location.hash = '#/clusters';
      navigate();
    } catch (err) {
      replace(result, errorBox(err, 'Sign-in'));
      input.select();
    } finally {
      button.disabled = false;
    }
  });
  replace(main, form);
  input.focus();
}

document.getElementById('logout').addEventListener('click', () => {
  clearToken();
  flash('Logged out. The token was removed from this tab.');
  showLogin();
});

document.getElementById('skip-link').addEventListener('click', (event) => {
  event.preventDefault();
  main.focus();
});

onUnauthorized((err) => {
  clearToken();
  showLogin(err);
});

window.addEventListener('hashchange', () => navigate());
navigate({ focus: false });
