// Small DOM helpers: build elements without innerHTML (API data is always text), format values,
// and render the standard loading / empty / error states.

/**
 * Create an element. `attrs` keys: `class`, `text`, `on<event>` (listeners), `dataset`, boolean
 * attributes (true sets, false/null omits), anything else as an attribute. Children may be nodes,
 * strings, numbers, arrays or null/false (skipped).
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs ?? {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === 'class') el.className = value;
    else if (key === 'text') el.textContent = String(value);
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else if (key.startsWith('on') && typeof value === 'function') {
      el.addEventListener(key.slice(2).toLowerCase(), value);
    } else if (key === 'value' && 'value' in el) el.value = value;
    else if (key === 'checked' || key === 'selected' || key === 'disabled') el[key] = Boolean(value);
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  appendAll(el, children);
  return el;
}

function appendAll(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) appendAll(el, child);
    else if (child instanceof Node) el.appendChild(child);
    else el.appendChild(document.createTextNode(String(child)));
  }
}

/** Append `children` to `el` (null/false skipped, arrays flattened, other values as text). */
export function append(el, ...children) {
  appendAll(el, children);
  return el;
}

/** Insert `children` at the start of `el`. */
export function prepend(el, ...children) {
  const fragment = document.createDocumentFragment();
  appendAll(fragment, children);
  el.prepend(fragment);
  return el;
}

/** Replace the content of `el` with `children`. */
export function replace(el, ...children) {
  el.replaceChildren();
  appendAll(el, children);
  return el;
}

/** A link inside the app (hash routing). `parts` are URL-encoded path segments. */
export function route(...parts) {
  return '#/' + parts.map((p) => encodeURIComponent(String(p))).join('/');
}

/** `#/path?query` with the non-empty entries of `params`. */
export function routeWithQuery(path, params) {
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== null && v !== undefined && v !== '') query.set(k, String(v));
  }
  const text = query.toString();
  return text ? `${path}?${text}` : path;
}

export function loading(what) {
  return h('p', { class: 'state loading', role: 'status' }, h('span', { class: 'spinner', 'aria-hidden': 'true' }), `Loading ${what}…`);
}

export function empty(message, ...extra) {
  return h('div', { class: 'state empty' }, h('p', { text: message }), ...extra);
}

/**
 * The API's error shape `{code, message, details}` (or a network failure) as a visible alert.
 * 401 and 403 get their own explanation: what the token is missing and what to do.
 */
export function errorBox(err, action) {
  const status = err?.status;
  let title;
  let hint = null;
  if (status === 401) {
    title = 'Not signed in (401)';
    hint = err?.code === 'token_expired'
      ? 'The token has expired. Ask an administrator for a new token, then sign in with it.'
      : 'The server did not accept the token. Sign in again with a valid token.';
  } else if (status === 403) {
    title = 'Not allowed for your role (403)';
    const needed = err?.details?.requiredRole;
    const role = err?.details?.role;
    hint = `${needed ? `This needs the ${needed} role${role ? `; your token has the ${role} role` : ''}. ` : ''}`
      + 'Viewers can read; approving, rejecting and aborting need the approver role; pushing snapshots, starting runs and schedules need the operator role; '
      + 'profiles, policies, arbitration, deleting clusters and tokens need admin (an admin may do everything). '
      + 'Ask an administrator for a token with the right role, then log out and sign in with it.';
  } else if (status === 0 || status === undefined) {
    title = 'Cannot reach the server';
  } else {
    title = `${action ? action + ' failed' : 'Request failed'} (${status})`;
  }
  const box = h('div', { class: 'error', role: 'alert' },
    h('p', { class: 'error-title' }, h('strong', { text: title })),
    h('p', { class: 'error-message' }, err?.message ?? String(err)),
    hint && h('p', { class: 'error-hint', text: hint }),
    err?.code && h('p', { class: 'error-code' }, 'Code: ', h('code', { text: err.code })),
  );
  if (err?.details !== null && err?.details !== undefined) {
    box.appendChild(h('details', {},
      h('summary', { text: 'Details' }),
      h('pre', { text: JSON.stringify(err.details, null, 2) })));
  }
  return box;
}

/** A status badge (`proposed`, `Running`, `succeeded`…). */
export function badge(value) {
  const text = String(value ?? '—');
  return h('span', { class: `badge badge-${text.toLowerCase()}`, text });
}

/** Utilization as a native <meter> (accessible as a gauge) with the percentage next to it. */
export function utilizationBar(label, percent, detail) {
  const value = Number.isFinite(percent) ? percent : 0;
  return h('div', { class: 'util' },
    h('meter', {
      min: 0, max: 100, low: 50, high: 80, optimum: 0, value: Math.min(value, 100),
      'aria-label': `${label} ${value.toFixed(1)}% of allocatable`,
      title: detail,
    }),
    h('span', { class: 'util-text', text: `${value.toFixed(0)}%` }),
    detail && h('span', { class: 'util-detail', text: detail }),
  );
}

export function formatCpu(millis) {
  if (millis === null || millis === undefined) return '—';
  return millis >= 1000 ? `${(millis / 1000).toFixed(millis % 1000 === 0 ? 0 : 2)} cores` : `${millis}m`;
}

export function formatBytes(bytes) {
  if (bytes === null || bytes === undefined) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(unit === 0 || value >= 100 ? 0 : 1)} ${units[unit]}`;
}

export function formatMs(ms) {
  if (ms === null || ms === undefined) return '—';
  return ms < 10 ? `${ms.toFixed(2)} ms` : ms < 1000 ? `${ms.toFixed(1)} ms` : `${(ms / 1000).toFixed(2)} s`;
}

/** An RFC 3339 timestamp as local date and time, with the exact value as a tooltip. */
export function time(value) {
  if (!value) return h('span', { text: '—' });
  const date = new Date(value);
  const text = Number.isNaN(date.getTime()) ? value : date.toLocaleString();
  return h('time', { datetime: value, title: value, text });
}

/**
 * A table with a caption (visually hidden when `hiddenCaption`), header and body rows. Each cell
 * gets its column's name as `data-label`, so under 600px the table reads as cards (`cards`
 * class, on unless `cards: false`). The wrapper scrolls (so the header row sticks inside it) and
 * can take focus, so a keyboard can scroll it too.
 */
export function table({ caption, hiddenCaption = false, columns, rows, className = '', cards = true }) {
  const names = columns.map((c) => (c instanceof Node ? c.textContent : String(c)));
  for (const tr of [rows].flat()) {
    if (!(tr instanceof Element)) continue;
    [...tr.children].forEach((cell, i) => {
      if (names[i] && !cell.hasAttribute('data-label')) cell.setAttribute('data-label', names[i]);
    });
  }
  return h('div', { class: 'table-wrap', tabindex: '0', role: 'region', 'aria-label': caption ?? 'Table' },
    h('table', { class: [className, cards ? 'cards' : ''].filter(Boolean).join(' ') },
      caption && h('caption', { class: hiddenCaption ? 'visually-hidden' : null, text: caption }),
      h('thead', {}, h('tr', {}, columns.map((c) => (c instanceof Node ? h('th', { scope: 'col' }, c)
        : h('th', { scope: 'col', text: c }))))),
      h('tbody', {}, rows)));
}

/** Definition list of label/value pairs. */
export function facts(pairs) {
  return h('dl', { class: 'facts' }, pairs.filter(Boolean).map(([k, v]) => [h('dt', { text: k }), h('dd', {}, v ?? '—')]));
}
