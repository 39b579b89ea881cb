// The shared harness of the browser tests (web/tests/*.test.mjs): one headless Chromium, named
// steps, checks, direct API calls, screenshots, axe-core accessibility checks and the tracking
// of page errors and unexpected console errors.
//
// Owns: launching and closing the browser, the step log, the failure report (which step, the page
// URL and text, a `failure-<scenario>.png` screenshot) and the exit code.
// Must not: hold scenario logic; each *.test.mjs file is one scenario built on `scenario()`.
//
//   REBALANCER_URL=http://127.0.0.1:8080 REBALANCER_TOKEN=<admin token> \
//   [REBALANCER_UI_ARTIFACTS=/tmp/dir] [CHROMIUM_PATH=/usr/bin/chromium] node tests/<name>.test.mjs
//
// A scenario file looks like:
//
//   import { scenario, step, check } from './harness.mjs';
//   await scenario('decisions', async ({ page, signIn }) => {
//     await step('sign in', async () => { await page.goto(BASE); await signIn(TOKEN); });
//   });

import { chromium } from 'playwright-core';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';

export const BASE = (process.env.REBALANCER_URL ?? '').replace(/\/$/, '');
export const TOKEN = process.env.REBALANCER_TOKEN ?? '';
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
if (!BASE || !TOKEN) {
  console.error('set REBALANCER_URL (e.g. http://127.0.0.1:8080) and REBALANCER_TOKEN (an admin token)');
  process.exit(2);
}
export const ARTIFACTS = process.env.REBALANCER_UI_ARTIFACTS ?? fs.mkdtempSync(path.join(os.tmpdir(), 'rebalancer-ui-'));
fs.mkdirSync(ARTIFACTS, { recursive: true });

/** The two viewports every main view is photographed at. */
export const DESKTOP = { width: 1280, height: 800 };
export const PHONE = { width: 390, height: 844 };

let scenarioName = 'ui';
let currentStep = '(start)';
/** Problems seen outside a check (page errors, console errors): the scenario fails on any. */
export const problems = [];
/** Console errors matching one of these are expected right now (see `tolerating`). */
const tolerated = [];

export function log(message) {
  console.log(`[${scenarioName}] ${message}`);
}

export function check(condition, message) {
  if (!condition) throw new Error(message);
}

/** Run one named step; its duration is logged, a failure names it. */
export async function step(name, fn) {
  currentStep = name;
  const started = Date.now();
  const result = await fn();
  log(`ok  ${name} (${Date.now() - started} ms)`);
  return result;
}

/**
 * Run `fn` while console errors matching `pattern` are expected (e.g. the 403 a viewer
 * provokes on purpose, or the failed requests of a dropped network).
 */
export async function tolerating(pattern, fn) {
  tolerated.push(pattern);
  try {
    return await fn();
  } finally {
    tolerated.splice(tolerated.indexOf(pattern), 1);
  }
}

/** The console errors Chromium logs for HTTP statuses (a regexp for `tolerating`). */
export function httpStatus(...codes) {
  return new RegExp(`Failed to load resource: the server responded with a status of (${codes.join('|')})`);
}

/** Direct API call (for set-up and for checking what the UI claims). */
export async function api(method, apiPath, { body, token = TOKEN } = {}) {
  const response = await fetch(`${BASE}/api/v1${apiPath}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}) },
    body: body !== undefined ? JSON.stringify(body) : undefined,
  });
  const text = await response.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch { json = text; }
  return { status: response.status, body: json };
}

/** `api()` that must answer `expected` (a status or a list of them); returns the body. */
export async function apiOk(method, apiPath, options = {}, expected = [200, 201, 204]) {
  const wanted = Array.isArray(expected) ? expected : [expected];
  const answer = await api(method, apiPath, options);
  check(wanted.includes(answer.status),
    `${method} ${apiPath} answered ${answer.status}: ${JSON.stringify(answer.body)?.slice(0, 600)}`);
  return answer.body;
}

/** Create a token of `role`; returns its secret. */
export async function createToken(role, name = `ui-${role}-${Date.now()}`) {
  const created = await apiOk('POST', '/tokens', { body: { name, role } }, 201);
  return created.token;
}

function watch(page) {
  page.on('pageerror', (err) => problems.push(`uncaught page error during "${currentStep}": ${err.message}`));
  page.on('console', (msg) => {
    if (msg.type() !== 'error') return;
    const text = msg.text();
    if (tolerated.some((pattern) => pattern.test(text))) return;
    problems.push(`console error during "${currentStep}": ${text}`);
  });
}

/** A PNG of `page` in ARTIFACTS (checked to be non-empty). */
export async function screenshot(page, name, { fullPage = false } = {}) {
  const file = path.join(ARTIFACTS, `${name}.png`);
  await page.screenshot({ path: file, fullPage });
  check(fs.statSync(file).size > 0, `screenshot ${file} is empty`);
  log(`screenshot ${file}`);
  return file;
}

/** Screenshots of the current view at 1280×800 and 390×844 (`<name>-1280.png`, `<name>-390.png`). */
export async function screenshotBoth(page, name, { fullPage = false } = {}) {
  const before = page.viewportSize();
  await page.setViewportSize(DESKTOP);
  await screenshot(page, `${name}-1280`, { fullPage });
  await page.setViewportSize(PHONE);
  await screenshot(page, `${name}-390`, { fullPage });
  if (before) await page.setViewportSize(before);
}

const require = createRequire(import.meta.url);
let axeSource = null;

/**
 * Run axe-core (from node_modules, injected through the DevTools protocol so the page's CSP
 * needs no exception) on the current page; fails listing every violation with its nodes.
 * `options.exclude`: selectors left out (say why at the call).
 */
export async function axe(page, label, { exclude = [] } = {}) {
  axeSource ??= fs.readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
  if (!(await page.evaluate(() => Boolean(window.axe)))) await page.evaluate(axeSource);
  const violations = await page.evaluate(async (excluded) => {
    const context = excluded.length ? { include: [document], exclude: excluded.map((s) => [s]) } : document;
    const result = await window.axe.run(context, { resultTypes: ['violations'] });
    return result.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      nodes: v.nodes.slice(0, 5).map((n) => `${n.target.join(' ')}: ${n.failureSummary?.replace(/\s+/g, ' ')}`),
      more: Math.max(0, v.nodes.length - 5),
    }));
  }, exclude);
  const text = violations.map((v) => `  - ${v.id} (${v.impact}): ${v.help}\n${v.nodes.map((n) => `      ${n}`).join('\n')}${v.more ? `\n      … and ${v.more} more` : ''}`).join('\n');
  check(violations.length === 0, `axe found ${violations.length} violation(s) on ${label}:\n${text}`);
  log(`axe: no violations on ${label}`);
}

/** Fill the sign-in form of `page` with `token` and submit. */
export async function signIn(page, token) {
  await page.getByLabel('API token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

/**
 * Run a scenario: launch Chromium, call `body({ page, context, newPage })`, then fail on any page
 * error or unexpected console error; exit with 0 or 1. `newPage()` opens a page in a fresh
 * browser context (its own sessionStorage: another user), watched like the first.
 */
export async function scenario(name, body) {
  scenarioName = name;
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const newContext = async () => {
    const context = await browser.newContext({ viewport: DESKTOP });
    context.setDefaultTimeout(20_000);
    return context;
  };
  const context = await newContext();
  const page = await context.newPage();
  watch(page);
  const newPage = async () => {
    const other = await (await newContext()).newPage();
    watch(other);
    return other;
  };
  let exitCode = 0;
  try {
    await body({ page, context, newPage });
    await step('no page errors and no unexpected console errors', async () => {
      check(problems.length === 0, problems.join('\n'));
    });
  } catch (err) {
    exitCode = 1;
    console.error(`[${name}] FAILED at step "${currentStep}": ${err?.stack ?? err}`);
    if (problems.length) console.error(`[${name}] also seen:\n${problems.join('\n')}`);
    console.error(`[${name}] page URL: ${page.url()}`);
    try {
      const visible = await page.locator('body').innerText({ timeout: 2000 });
      console.error(`[${name}] page text:\n${visible.slice(0, 3000)}`);
      await screenshot(page, `failure-${name}`);
    } catch (e) {
      console.error(`[${name}] could not capture the page: ${e.message}`);
    }
  } finally {
    await browser.close();
  }
  log(`screenshots in ${ARTIFACTS}`);
  process.exit(exitCode);
}
