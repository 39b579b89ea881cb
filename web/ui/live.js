// Live updates: one `GET /api/v1/events` server-sent-events stream per signed-in tab, read with
// fetch() + ReadableStream (EventSource cannot send the bearer token), and the header's
// "live / reconnecting… / stale since hh:mm" indicator.
//
// Owns: the connection (reconnect with exponential backoff and jitter, `Last-Event-ID` resume,
// a watchdog for a silent connection), dispatching events to subscribers by type, and telling
// every subscriber to refetch when events may have been missed (`reset` from the server, or a
// reconnect with nothing to resume from).
// Must not: fetch anything else or know any view; views subscribe through `ctx.live.on(type, fn)`
// (app.js removes their subscriptions when the user leaves the view).

import { getToken } from './api.js';
import { h, replace } from './dom.js';

const URL_PATH = '/api/v1/events';
/** Backoff: 1 s, 2 s, 4 s … 30 s, each ±50 % jitter. */
const BACKOFF_MIN_MS = 1000;
const BACKOFF_MAX_MS = 30_000;
/** The server sends a keep-alive every 15 s: a stream silent for this long is dead. */
const SILENCE_MS = 45_000;

/** Call `fn` once `ms` after the last call (for refreshing a list after a burst of events). */
export function debounce(fn, ms = 300) {
  let timer = null;
  const debounced = (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
  debounced.cancel = () => clearTimeout(timer);
  return debounced;
}

function hhmm(date) {
  return date.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
}

/**
 * Parse a server-sent-events byte stream: `onEvent({id, type, data})` per event; comments
 * (`: keep-alive`) call `onComment`. Returns a function taking decoded text chunks.
 */
export function sseParser(onEvent, onComment = () => {}) {
  let buffer = '';
  let event = { id: null, type: 'message', data: [] };
  const line = (text) => {
    if (text === '') {
      if (event.data.length || event.type !== 'message') {
        onEvent({ id: event.id, type: event.type, data: event.data.join('\n') });
      }
      event = { id: null, type: 'message', data: [] };
      return;
    }
    if (text.startsWith(':')) {
      onComment(text.slice(1).trim());
      return;
    }
    const colon = text.indexOf(':');
    const field = colon < 0 ? text : text.slice(0, colon);
    let value = colon < 0 ? '' : text.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'id') event.id = value;
    else if (field === 'event') event.type = value;
    else if (field === 'data') event.data.push(value);
  };
  return (chunk) => {
    buffer += chunk;
    let newline;
    while ((newline = buffer.search(/\r\n|\r|\n/)) >= 0) {
      const text = buffer.slice(0, newline);
      buffer = buffer.slice(newline + (buffer.startsWith('\r\n', newline) ? 2 : 1));
      line(text);
    }
  };
}

/**
 * The tab's live connection. `indicator`: the header element it keeps up to date.
 * `on(type, fn)` subscribes (returns the unsubscribe); `fn(data, {type, id, reset})` is called
 * for each event of `type` and, with `{reset: true}`, whenever everything must be refetched.
 */
export function createLive({ indicator, onUnauthorized = () => {} } = {}) {
  const listeners = new Map(); // type → Set<fn>
  const statusListeners = new Set();
  let controller = null;
  let lastEventId = null;
  let attempt = 0;
  let retryTimer = null;
  let watchdog = null;
  let state = 'off'; // off | connecting | live | reconnecting | unavailable
  let staleSince = null; // Date the data stopped being live (null while live)
  let everConnected = false;
  let detail = '';

  const emit = (type, data, meta) => {
    for (const fn of [...(listeners.get(type) ?? [])]) {
      try {
        fn(data, meta);
      } catch (err) {
        console.warn(`live: a "${type}" subscriber failed`, err);
      }
    }
  };
  const resetAll = (why) => {
    for (const type of [...listeners.keys()]) emit(type, {}, { type, id: null, reset: true, why });
  };

  const render = () => {
    if (!indicator) return;
    indicator.dataset.state = state;
    indicator.hidden = state === 'off';
    let text;
    let title;
    if (state === 'live') {
      text = 'live';
      title = 'Live: lists update as runs, decisions and pod migrations change.';
    } else if (state === 'connecting') {
      text = 'connecting…';
      title = 'Connecting to the live updates.';
    } else if (state === 'reconnecting') {
      text = staleSince ? `reconnecting… stale since ${hhmm(staleSince)}` : 'reconnecting…';
      title = `The live updates were cut${detail ? ` (${detail})` : ''}; what is shown may be out of date. Retrying with backoff.`;
    } else if (state === 'unavailable') {
      text = staleSince ? `stale since ${hhmm(staleSince)}` : 'not live';
      title = detail || 'Live updates are not available; reload the page to see changes.';
    } else {
      text = '';
      title = '';
    }
    replace(indicator, h('span', { class: 'live-dot', 'aria-hidden': 'true' }), h('span', { class: 'live-text', text }));
    indicator.title = title;
    indicator.setAttribute('aria-label', `Live updates: ${text}`);
    for (const fn of statusListeners) fn(api.status);
  };

  const setState = (next, why = '') => {
    if ((next === 'reconnecting' || next === 'unavailable') && !staleSince) staleSince = new Date();
    if (next === 'live') staleSince = null;
    state = next;
    detail = why;
    render();
  };

  const armWatchdog = () => {
    clearTimeout(watchdog);
    watchdog = setTimeout(() => controller?.abort(new DOMException('no data and no keep-alive for 45 s', 'TimeoutError')), SILENCE_MS);
  };

  const scheduleRetry = (why) => {
    if (state === 'off') return;
    attempt += 1;
    const base = Math.min(BACKOFF_MAX_MS, BACKOFF_MIN_MS * 2 ** (attempt - 1));
    const delay = Math.round(base * (0.5 + Math.random()));
    setState('reconnecting', why);
    clearTimeout(retryTimer);
    retryTimer = setTimeout(connect, delay);
  };

  async function connect() {
    const token = getToken();
    if (!token || state === 'off') return;
    controller = new AbortController();
    const mine = controller;
    if (!everConnected) setState('connecting');
    const headers = { Accept: 'text/event-stream', Authorization: `Bearer ${token}` };
    if (lastEventId !== null) headers['Last-Event-ID'] = lastEventId;
    let response;
    try {
      response = await fetch(URL_PATH, { headers, signal: mine.signal, cache: 'no-store', credentials: 'omit' });
    } catch (err) {
      if (mine !== controller || state === 'off') return;
      scheduleRetry(`the server could not be reached: ${err?.message ?? err}`);
      return;
    }
    if (mine !== controller || state === 'off') return;
    if (response.status === 401) {
      setState('unavailable', 'the token was not accepted');
      onUnauthorized();
      return;
    }
    if (response.status === 404) {
      // This server has no events stream: say so instead of retrying forever.
      staleSince = staleSince ?? new Date();
      setState('unavailable', 'This server has no live updates (GET /api/v1/events answered 404); reload to see changes.');
      return;
    }
    if (!response.ok || !response.body) {
      scheduleRetry(`GET /api/v1/events answered ${response.status}`);
      return;
    }
    const resumed = lastEventId !== null;
    // Views loaded their data before this connection: after a cut or failed attempts, with
    // nothing to resume from, events may have been missed, so they refetch.
    const gap = everConnected || attempt > 0;
    everConnected = true;
    attempt = 0;
    setState('live');
    if (gap && !resumed) resetAll('reconnected');
    armWatchdog();
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    const feed = sseParser((event) => {
      if (event.id !== null && event.id !== '') lastEventId = event.id;
      if (event.type === 'reset') {
        resetAll('reset');
        return;
      }
      let data = {};
      try {
        data = event.data ? JSON.parse(event.data) : {};
      } catch {
        data = { raw: event.data };
      }
      emit(event.type, data, { type: event.type, id: event.id, reset: false });
    });
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        armWatchdog();
        feed(value);
      }
      if (mine === controller && state !== 'off') scheduleRetry('the server closed the stream');
    } catch (err) {
      if (mine === controller && state !== 'off') scheduleRetry(err?.message ?? String(err));
    } finally {
      clearTimeout(watchdog);
    }
  }

  const api = {
    /** Open the stream (after sign-in). */
    start() {
      if (state !== 'off') return;
      state = 'connecting';
      attempt = 0;
      everConnected = false;
      lastEventId = null;
      staleSince = null;
      connect();
    },
    /** Close it (log out). */
    stop() {
      state = 'off';
      clearTimeout(retryTimer);
      clearTimeout(watchdog);
      controller?.abort();
      controller = null;
      render();
    },
    on(type, fn) {
      if (!listeners.has(type)) listeners.set(type, new Set());
      listeners.get(type).add(fn);
      return () => listeners.get(type)?.delete(fn);
    },
    /** Be told when the connection state changes (`fn(status)`); returns the unsubscribe. */
    onStatus(fn) {
      statusListeners.add(fn);
      return () => statusListeners.delete(fn);
    },
    get status() {
      return { state, staleSince, detail, lastEventId };
    },
    /** True while what is shown may be out of date (not connected to the stream). */
    get stale() {
      return state !== 'live';
    },
  };
  render();
  return api;
}

/**
 * The per-view face of `live`: the same `on`, but every subscription is dropped by `close()`
 * (app.js calls it when the user leaves the view).
 */
export function viewLive(live) {
  const subscriptions = [];
  return {
    on(type, fn) {
      const off = live.on(type, fn);
      subscriptions.push(off);
      return off;
    },
    onStatus(fn) {
      const off = live.onStatus(fn);
      subscriptions.push(off);
      return off;
    },
    get stale() {
      return live.stale;
    },
    get status() {
      return live.status;
    },
    close() {
      for (const off of subscriptions.splice(0)) off();
    },
  };
}
