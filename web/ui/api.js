// The REST client: every /api/v1 call carries `Authorization: Bearer <token>` from
// sessionStorage; failures become ApiError with the API's `{code, message, details}`.

const TOKEN_KEY = 'rebalancer.token';
const BASE = '/api/v1';

/** An error answered by the API (or a network failure, status 0). */
export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.details = details ?? null;
  }
}

export function getToken() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(token) {
  sessionStorage.setItem(TOKEN_KEY, token);
}

export function clearToken() {
  sessionStorage.removeItem(TOKEN_KEY);
}

/** Listeners told when the server rejects the session's token (401). */
const unauthorizedListeners = new Set();
export function onUnauthorized(listener) {
  unauthorizedListeners.add(listener);
}

/**
 * Call the API. `path` is relative to /api/v1 (e.g. `/clusters`); `query` entries that are
 * empty are left out; `body` is sent as JSON. Returns the parsed JSON (null for 204).
 * Options: `signal` (AbortSignal), `token` (use this token instead of the stored one; a 401 then
 * does not end the session).
 */
export async function api(path, { method = 'GET', query, body, signal, token } = {}) {
  let url = BASE + path;
  if (query) {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) {
      if (v !== null && v !== undefined && v !== '') params.set(k, String(v));
    }
    const text = params.toString();
    if (text) url += `?${text}`;
  }
  const headers = { Accept: 'application/json' };
  const bearer = token ?? getToken();
  if (bearer) headers.Authorization = `Bearer ${bearer}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';

  let response;
  try {
    response = await fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
      credentials: 'omit',
      cache: 'no-store',
    });
  } catch (err) {
    if (err?.name === 'AbortError') throw err;
    throw new ApiError(0, 'network_error', `The server could not be reached (${err?.message ?? err}). Is it running?`);
  }

  const text = await response.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  if (!response.ok) {
    const error = data && typeof data === 'object' && typeof data.message === 'string'
      ? new ApiError(response.status, data.code ?? 'error', data.message, data.details)
      : new ApiError(response.status, 'http_error', `${response.status} ${response.statusText}`.trim());
    if (response.status === 401 && token === undefined) {
      for (const listener of unauthorizedListeners) listener(error);
    }
    throw error;
  }
  return data;
}

