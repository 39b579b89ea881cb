// Browser test of the cluster view and the administration pages against a running server.
//
//   REBALANCER_URL=http://127.0.0.1:8080 REBALANCER_TOKEN=<admin token> \
//   [REBALANCER_UI_ARTIFACTS=/tmp/dir] [REBALANCER_POLICY_WASM=path/to/a/policy.wasm] \
//   node tests/admin.test.mjs
//
// Built on the shared harness (./harness.mjs: headless Chromium, steps, axe-core, screenshots).
// a pushed 5,000-node cluster drawn as a heatmap (render time printed), its thresholds, hover,
// keyboard and click-through to a node's pods; every administration flow (a bad .wasm upload
// shows the server's message verbatim, a refused profile YAML shows each problem at its path,
// export, auto-approve rules, schedules, arbitration, retention, a token's secret shown once,
// the audit log's filters and paging); a viewer sees no administration actions; axe-core on
// every view; screenshots at 1280×800 and 390×844 (`admin-<view>-{1280,390}.png`, none of them
// scrolling sideways at 390 px). REBALANCER_POLICY_WASM (default: example_pod_age.wasm of the cargo build)
// is the valid module uploaded.

import fs from 'node:fs';
import path from 'node:path';
import {
  BASE, TOKEN, api, axe as axeCheck, check, httpStatus, log, scenario, screenshotBoth, signIn as fillSignIn, step, tolerating,
} from './harness.mjs';

const NODES = Number(process.env.REBALANCER_HEATMAP_NODES ?? 5000);
/** A valid policy module: the one named, or example-pod-age from the cargo build. */
const WASM = process.env.REBALANCER_POLICY_WASM ?? [
  process.env.CARGO_TARGET_DIR, path.join(process.cwd(), '..', 'target'),
].filter(Boolean).map((dir) => path.join(dir, 'policies-wasm/wasm32-wasip2/policy/example_pod_age.wasm'))
  .find((file) => fs.existsSync(file)) ?? '';

const figures = [];

/** An API call with a body that is not JSON (a module, YAML). */
async function rawApi(method, apiPath, bytes, contentType) {
  const response = await fetch(`${BASE}/api/v1${apiPath}`, {
    method, headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': contentType }, body: bytes,
  });
  const text = await response.text();
  let json = null;
  try { json = JSON.parse(text); } catch { json = text; }
  return { status: response.status, body: json };
}

const ANY_4XX = httpStatus('400', '403', '404', '409', '413', '422');

// ---- test data ---------------------------------------------------------------------------------
/** A cluster of `n` nodes (16 cpu, 64Gi, 110 pods) with 0–3 pods each of varying requests. */
function bigCluster(n) {
  const items = [];
  for (let i = 0; i < n; i += 1) {
    const name = `node-${String(i).padStart(5, '0')}`;
    const ready = i % 97 !== 5;
    items.push({
      apiVersion: 'v1', kind: 'Node',
      metadata: { name, uid: `uid-${name}`, labels: { 'kubernetes.io/hostname': name } },
      spec: i % 211 === 7 ? { unschedulable: true } : {},
      status: {
        allocatable: { cpu: '16', memory: '64Gi', pods: '110' },
        capacity: { cpu: '16', memory: '64Gi', pods: '110' },
        conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }],
      },
    });
    const pods = i % 4;
    for (let p = 0; p < pods; p += 1) {
      // 0.5–14.5 cores: spreads nodes from idle to over the high thresholds.
      const cpu = 500 + ((i * 37 + p * 1013) % 4700);
      const mem = 256 + ((i * 53 + p * 331) % 20000);
      items.push({
        apiVersion: 'v1', kind: 'Pod',
        metadata: {
          name: `app-${i}-${p}`, namespace: `ns-${i % 20}`, uid: `uid-app-${i}-${p}`,
          labels: { app: `app-${i % 50}` },
          ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: `rs-${i % 50}`, uid: `uid-rs-${i % 50}`, controller: true }],
        },
        spec: { nodeName: name, containers: [{ name: 'main', image: 'registry.example/app:1', resources: { requests: { cpu: `${cpu}m`, memory: `${mem}Mi` } } }] },
        status: { phase: 'Running' },
      });
    }
  }
  return { apiVersion: 'v1', kind: 'List', metadata: { resourceVersion: '' }, items };
}

const SUFFIX = Date.now().toString(36);
const BIG = `big-${SUFFIX}`;
const PROFILE = `balance-${SUFFIX}`;
const VALID_PROFILE = `apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
  - name: balance
    pluginConfig:
      - name: LowNodeUtilization
        args:
          thresholds: {cpu: 20, memory: 20, pods: 20}
          targetThresholds: {cpu: 50, memory: 50, pods: 50}
    plugins:
      balance:
        enabled: [LowNodeUtilization]
`;
const INVALID_PROFILE = `apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
  - name: balance
    pluginConfig:
      - name: LowNodeUtilization
        args:
          thresholds:
            cpu: lots
          targetThresholds: {cpu: 50, memory: 50, pods: 50}
    plugins:
      balance:
        enabled: [LowNodeUtilization, NoSuchPlugin]
`;

await scenario('admin', async ({ page, context, newPage }) => {
  const main = page.locator('main');
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: BASE });
  async function screenshot(name) {
    await page.setViewportSize({ width: 390, height: 844 });
    await page.waitForTimeout(150);
    // These views' content (main) must fit; the shell's header is the shell's test.
    const wide = await page.evaluate(() => [...document.querySelectorAll('main *')]
      .filter((el) => el.getBoundingClientRect().right > window.innerWidth + 1 && !el.closest('.table-wrap:not(:has(table.cards)), table.cards thead, .visually-hidden'))
      .slice(0, 6).map((el) => `${el.tagName.toLowerCase()}.${el.className} (${Math.round(el.getBoundingClientRect().width)}px)`));
    check(wide.length === 0, `${name}: content wider than 390px: ${wide.join(', ')}`);
    await screenshotBoth(page, `admin-${name}`);
    await page.setViewportSize({ width: 1280, height: 800 });
  }
  const axe = (label) => axeCheck(page, label);

  async function visit(hash, heading) {
    const url = `${BASE}/${hash}`;
    // The same hash again is no navigation: reload to render the view afresh.
    if (page.url() === url) await page.reload();
    else await page.goto(url);
    await page.getByRole('heading', { name: heading, level: 1 }).waitFor();
    await page.waitForFunction(() => document.querySelector('main')?.getAttribute('aria-busy') !== 'true');
  }

  async function signIn(token, on = page) {
    await on.goto(`${BASE}/`);
    await fillSignIn(on, token);
    await on.getByRole('navigation', { name: 'Main' }).waitFor();
  }


  await step(`push a generated ${NODES}-node cluster`, async () => {
    const started = Date.now();
    const document = bigCluster(NODES);
    const pushed = await api('PUT', `/clusters/${BIG}/snapshot`, { body: document });
    check(pushed.status === 200 || pushed.status === 201, `push answered ${pushed.status}: ${JSON.stringify(pushed.body).slice(0, 300)}`);
    check(pushed.body.nodes === NODES, `the cluster has ${pushed.body.nodes} nodes`);
    figures.push(`push of ${NODES} nodes / ${document.items.length - NODES} pods: ${Date.now() - started} ms`);
  });

  await step('sign in', async () => {
    await signIn(TOKEN);
  });

  await step('units: node percentages, threshold bands (deviation from the mean too), YAML path lines', async () => {
    const results = await page.evaluate(async () => {
      const hm = await import('/ui/heatmap.js');
      const prof = await import('/ui/views/profiles.js');
      const clusters = await import('/ui/views/clusters.js');
      const kube = clusters.kubernetesPanel({
        apiServer: 'https://10.0.0.1:6443',
        connection: { state: 'disconnected', message: 'watch failed: connection refused', sinceMs: 1764300000000, lastSyncMs: 1764290000000, revision: 7, optionalKinds: ['NodeMetrics'] },
        lease: { lease: 'rebalancer/cluster-a', held: false, holder: 'rebalancer-1', identity: 'rebalancer-0', error: null },
        warnings: ['PriorityClass rebalancer-placeholder is missing'],
        reservationMode: 'placeholder',
      }).innerText;
      const node = (cpu, used, pods) => ({
        name: 'n', ready: true, unschedulable: false,
        cpu: { requested: cpu, allocatable: 1000, used }, memory: { requested: 0, allocatable: 0, used: null }, pods: { count: pods, capacity: 10 },
      });
      const t = [{ plugin: 'LowNodeUtilization', basis: 'requested', deviation: false, low: { cpu: 20 }, high: { cpu: 50 } }];
      const d = [{ plugin: 'LowNodeUtilization', basis: 'requested', deviation: true, low: { cpu: 10 }, high: { cpu: 10 } }];
      const yaml = 'apiVersion: x\nprofiles:\n  - name: a\n    pluginConfig:\n      - name: P\n        args: {}\n      - name: Q\n        args:\n          thresholds:\n            cpu: lots\n';
      return {
        requested: hm.percentOf(node(250, null, 3), 'cpu', 'requested'),
        usage: hm.percentOf(node(250, 600, 3), 'cpu', 'usage'),
        noUsage: hm.percentOf(node(250, null, 3), 'cpu', 'usage'),
        memoryNone: hm.percentOf(node(250, null, 3), 'memory', 'requested'),
        pods: hm.percentOf(node(250, null, 3), 'pods', 'usage'),
        bands: hm.bandsFor(t, 'cpu', 'requested', [10, 30, 70]),
        bandsOther: hm.bandsFor(t, 'memory', 'requested', [10]),
        deviation: hm.bandsFor(d, 'cpu', 'requested', [10, 30, 50]),
        kinds: [10, 20, 35, 50, 51, null].map((v) => hm.band(v, { low: 20, high: 50 })),
        line: prof.lineOfPath(yaml, 'profiles[0].pluginConfig[1].args.thresholds.cpu'),
        lineItem: prof.lineOfPath(yaml, 'profiles[0].pluginConfig[1]'),
        lineMissing: prof.lineOfPath(yaml, 'nothing.here'),
        // The server's own YAML puts a list's items at its key's indentation.
        serverStyle: ['profiles[0].pluginConfig[0].args.thresholds.cpu', 'profiles[0].pluginConfig[1].args', 'profiles[0].plugins.balance.enabled[1]']
          .map((path) => prof.lineOfPath('apiVersion: x\nprofiles:\n- name: balance\n  pluginConfig:\n  - args:\n      targetThresholds:\n        cpu: 60\n      thresholds:\n        cpu: 20\n    name: LowNodeUtilization\n  - args: {}\n    name: Other\n  plugins:\n    balance:\n      enabled:\n      - LowNodeUtilization\n      - Nope\n', path)),
        kube,
      };
    });
    const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
    check(results.requested === 25 && results.usage === 60 && results.noUsage === null && results.memoryNone === null && results.pods === 30,
      `percentages: ${JSON.stringify(results)}`);
    check(same(results.bands, { low: 20, high: 50, plugin: 'LowNodeUtilization', basis: 'requested', deviation: false }), `bands: ${JSON.stringify(results.bands)}`);
    check(results.bandsOther === null, 'a metric without thresholds has bands');
    check(results.deviation.low === 20 && results.deviation.high === 40, `deviation bands around the mean 30: ${JSON.stringify(results.deviation)}`);
    check(same(results.kinds, ['below', 'below', 'within', 'within', 'above', 'none']), `bands of values: ${results.kinds}`);
    for (const text of ['https://10.0.0.1:6443', 'disconnected', 'connection refused', 'rebalancer-1', 'another server', 'rebalancer/cluster-a', 'NodeMetrics', 'PriorityClass rebalancer-placeholder is missing', 'Reservation mode', 'placeholder']) {
      check(results.kube.includes(text), `the Kubernetes panel lacks "${text}":\n${results.kube}`);
    }
    check(results.line === 9 && results.lineItem === 6 && results.lineMissing === -1, `YAML lines: ${results.line}, ${results.lineItem}, ${results.lineMissing}`);
    check(same(results.serverStyle, [8, 10, 16]), `YAML lines in the server's style: ${results.serverStyle}`);
  });

  await step('import a profile: a refused YAML lists each problem at its path', async () => {
    await visit('#/profiles', 'Profiles');
    await page.getByLabel('Profile name').fill(PROFILE);
    await page.getByLabel('DeschedulerPolicy (YAML or JSON)').fill(INVALID_PROFILE);
    const expected = await rawApi('PUT', `/profiles/${PROFILE}-probe`, INVALID_PROFILE, 'application/yaml');
    check(expected.status === 422, `the API took the invalid profile: ${expected.status}`);
    const list = page.locator('#import-yaml-problems .problems li');
    await tolerating(ANY_4XX, async () => {
      await page.getByRole('button', { name: 'Import profile' }).click();
      await list.first().waitFor();
    });
    const shown = await list.evaluateAll((lis) => lis.map((li) => li.dataset.field));
    const fields = expected.body.details.errors.map((e) => e.field);
    check(fields.length >= 2, `expected at least two problems, the API gives ${JSON.stringify(fields)}`);
    check(JSON.stringify(shown) === JSON.stringify(fields), `shown paths ${JSON.stringify(shown)}, the API's ${JSON.stringify(fields)}`);
    for (const e of expected.body.details.errors) {
      const item = page.locator(`#import-yaml-problems li[data-field="${e.field}"]`);
      check((await item.locator('.problem-message').innerText()).trim() === e.message.trim(), `message of ${e.field} differs`);
    }
    // The path shows the line in the editor.
    const thresholds = expected.body.details.errors.find((e) => e.field.includes('thresholds'));
    check(thresholds, `no problem at the thresholds: ${JSON.stringify(fields)}`);
    await page.locator(`#import-yaml-problems li[data-field="${thresholds.field}"] button`).click();
    const selected = await page.evaluate(() => {
      const t = document.getElementById('import-yaml');
      return t.value.slice(t.selectionStart, t.selectionEnd);
    });
    check(/thresholds|cpu/.test(selected), `"Show line" selected ${JSON.stringify(selected)}`);
    await axe('profiles with problems');
    await screenshot('profile-problems');
    await page.getByLabel('DeschedulerPolicy (YAML or JSON)').fill(VALID_PROFILE);
    await page.getByRole('button', { name: 'Import profile' }).click();
    await page.getByRole('heading', { name: `Profile ${PROFILE}`, level: 1 }).waitFor();
    check((await api('GET', `/profiles/${PROFILE}`)).status === 200, 'the profile was not stored');
  });

  await step('edit a profile: a refused edit keeps the text; export downloads the server\'s YAML', async () => {
    const editor = page.getByLabel(`DeschedulerPolicy of ${PROFILE} (YAML)`);
    await editor.waitFor();
    const original = await editor.inputValue();
    check(original.includes('LowNodeUtilization'), 'the editor does not hold the YAML');
    const broken = original.replace(/targetThresholds:\n(\s+)cpu: 50/, 'targetThresholds:\n$1cpu: -5');
    check(broken !== original, `could not break the YAML:\n${original}`);
    await editor.fill(broken);
    await tolerating(ANY_4XX, async () => {
      await page.getByRole('button', { name: 'Save profile' }).click();
      await page.locator('#profile-yaml-problems .problems li').first().waitFor();
    });
    const field = await page.locator('#profile-yaml-problems .problems li').first().getAttribute('data-field');
    check(field.includes('targetThresholds'), `the problem is at ${field}`);
    check(await editor.inputValue() === broken, 'the refused text was not kept');
    await editor.fill(original.replace(/targetThresholds:\n(\s+)cpu: 50/, 'targetThresholds:\n$1cpu: 60'));
    await page.getByRole('button', { name: 'Save profile' }).click();
    await page.locator('#flash', { hasText: `Profile ${PROFILE} saved` }).waitFor();
    const stored = (await api('GET', `/profiles/${PROFILE}`)).body;
    check(JSON.stringify(stored.document).includes('60'), 'the edit was not stored');
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: 'Export YAML' }).click(),
    ]);
    check(download.suggestedFilename() === `${PROFILE}.yaml`, `downloaded ${download.suggestedFilename()}`);
    const text = fs.readFileSync(await download.path(), 'utf8');
    check(text.includes('DeschedulerPolicy') && text.includes('LowNodeUtilization'), `exported:\n${text}`);
  });

  await step('auto-approve rules: a refused rule is shown at the rule; a good one is stored', async () => {
    await page.getByRole('button', { name: 'Add a rule' }).click();
    const rule = page.locator('fieldset.rule').last();
    await rule.getByLabel('Name', { exact: true }).fill('batch');
    await rule.getByLabel(/^Namespaces/).fill('ns-1, ns-2');
    await rule.getByLabel(/^Pod labels/).fill('bad key!=x');
    await tolerating(ANY_4XX, async () => {
      await page.getByRole('button', { name: 'Save rules' }).click();
      await rule.locator('.rule-problems .field-error').first().waitFor();
    });
    check((await rule.locator('.rule-problems').innerText()).includes('rules[0]'), 'the problem does not name rules[0]');
    await rule.getByLabel(/^Pod labels/).fill('tier=batch');
    await page.getByRole('button', { name: 'Save rules' }).click();
    await page.getByText('Saved 1 rule(s).').waitFor();
    const stored = (await api('GET', `/profiles/${PROFILE}/auto-approve`)).body;
    check(stored.rules.length === 1 && stored.rules[0].name === 'batch'
      && stored.rules[0].namespaces.join() === 'ns-1,ns-2' && stored.rules[0].podSelector.matchLabels.tier === 'batch',
    `stored rules: ${JSON.stringify(stored.rules)}`);
    await axe('profile detail');
    await screenshot('profile-detail');
  });

  let balance = null;
  await step(`the ${NODES}-node heatmap draws on one canvas, against the profile's thresholds`, async () => {
      const started = Date.now();
      await page.goto(`${BASE}/#/clusters/${BIG}?profile=${PROFILE}`);
      const figure = page.locator('figure.heatmap');
      await figure.waitFor({ timeout: 60_000 });
      const shownMs = Date.now() - started;
      const renderMs = Number(await page.locator('.heatmap-holder').getAttribute('data-render-ms'));
      figures.push(`heatmap of ${NODES} nodes: drawn in ${renderMs.toFixed(1)} ms, on screen ${shownMs} ms after navigation`);
      log(`heatmap render: ${renderMs.toFixed(1)} ms (canvas), ${shownMs} ms from navigation to the heatmap shown`);
      check(Number(await figure.getAttribute('data-nodes')) === NODES, 'the heatmap does not hold every node');
      check(await page.locator('canvas.heatmap-canvas').count() === 1, 'not one canvas');
      const rows = await page.locator('table.nodes tbody tr').count();
      check(rows <= 50, `${rows} node rows in the DOM: the table is not paged`);
      check(shownMs < 15_000, `the heatmap took ${shownMs} ms`);
      const b = await api('GET', `/clusters/${BIG}/balance?profile=${PROFILE}`);
      check(b.status === 200, `GET /clusters/${BIG}/balance answered ${b.status}`);
      balance = b.body;
      const t = balance.thresholds.find((x) => x.basis === 'requested') ?? balance.thresholds[0];
      check(t, `no thresholds for profile ${PROFILE}: ${JSON.stringify(balance.thresholds)}`);
      check(Number(await figure.getAttribute('data-low')) === t.low.cpu, `heatmap low ${await figure.getAttribute('data-low')}, profile ${t.low.cpu}`);
      check(Number(await figure.getAttribute('data-high')) === t.high.cpu, `heatmap high ${await figure.getAttribute('data-high')}, profile ${t.high.cpu}`);
      check((await figure.locator('.heatmap-legend').innerText()).includes(`above ${t.high.cpu}%`), 'the legend does not name the high threshold');
      // The table's bars draw the same thresholds (not fixed 50/80 %).
      const meter = page.locator('table.nodes tbody tr').first().locator('meter').first();
      check(Number(await meter.getAttribute('high')) === t.high.cpu, 'the cpu bar is not coloured by the high threshold');
      const cpuRow = page.locator('table.balance tbody tr[data-metric="cpu"]');
      check((await cpuRow.innerText()).includes(`${balance.summary.cpu.mean.toFixed(1)}%`), 'the summary does not show the server\'s mean');
      const above = await page.locator('#above-title').innerText();
      check(above.endsWith(`: ${balance.summary.cpu.above}`), `"${above}" does not count ${balance.summary.cpu.above} nodes above`);
  });

  await step('hover shows a tooltip; a click opens the node; its pods, decisions and pod migrations are linked', async () => {
      const canvas = page.locator('canvas.heatmap-canvas');
      await canvas.scrollIntoViewIfNeeded();
      const box = await canvas.boundingBox();
      await page.mouse.move(box.x + 3, box.y + 3);
      const tip = page.locator('.heatmap-tooltip');
      await tip.waitFor({ state: 'visible' });
      check((await tip.innerText()).includes('node-00000'), `tooltip: ${await tip.innerText()}`);
      await page.mouse.click(box.x + 3, box.y + 3);
      await page.getByRole('heading', { name: 'Node node-00000', level: 3 }).waitFor();
      const decisions = await page.getByRole('link', { name: 'Decisions for this node' }).getAttribute('href');
      check(decisions.includes(`cluster=${BIG}`) && decisions.includes('node=node-00000'), `decisions link: ${decisions}`);
      const migrations = await page.getByRole('link', { name: 'Pod migrations of this node' }).getAttribute('href');
      check(migrations.includes('node=node-00000'), `pod migrations link: ${migrations}`);
      await screenshot('cluster-heatmap');
      await axe('cluster heatmap');
      // Keyboard: focus the canvas, move right, open with Enter.
      await canvas.focus();
      await page.keyboard.press('ArrowRight');
      await page.keyboard.press('Enter');
      await page.getByRole('heading', { name: 'Node node-00001', level: 3 }).waitFor();
      await page.getByRole('link', { name: 'Pods on this node' }).click();
      await page.getByRole('heading', { name: 'Node node-00001', level: 1 }).waitFor();
      await page.locator('main table tbody tr').first().waitFor();
      check(await page.locator('main table tbody tr').count() === 1, 'node-00001 should list its one pod');
      await axe('node');
      await screenshot('node');
  });

  await step('measured usage: nodes without a measurement are said so', async () => {
      await page.goto(`${BASE}/#/clusters/${BIG}?profile=${PROFILE}&basis=usage`);
      await page.locator('figure.heatmap').waitFor({ timeout: 60_000 });
      await page.getByText(/report no measured usage/).waitFor();
      check(await page.getByRole('radio', { name: 'Measured usage' }).isChecked(), 'the measured-usage toggle is not on');
      await page.getByRole('radio', { name: 'Requested' }).check();
      await page.waitForURL((url) => !url.hash.includes('basis=usage'));
  });

  await step('live: a new snapshot of the cluster redraws its view without a reload', async () => {
    await page.goto(`${BASE}/#/clusters/${BIG}?profile=${PROFILE}`);
    await page.locator('figure.heatmap').waitFor({ timeout: 60_000 });
    const marker = await page.evaluate(() => { window.__sameDocument = true; return true; });
    const document = bigCluster(NODES);
    document.items.push({
      apiVersion: 'v1', kind: 'Pod',
      metadata: { name: 'live-extra', namespace: 'ns-live', uid: 'uid-live-extra' },
      spec: { nodeName: 'node-00000', containers: [{ name: 'main', image: 'x', resources: { requests: { cpu: '8', memory: '1Gi' } } }] },
      status: { phase: 'Running' },
    });
    const pushed = await api('PUT', `/clusters/${BIG}/snapshot`, { body: document });
    check(pushed.status === 200, `push answered ${pushed.status}`);
    const revision = page.locator('.facts dt', { hasText: /^Revision$/ }).locator('xpath=following-sibling::dd[1]');
    await page.waitForFunction((rev) => [...document.querySelectorAll('.facts dt')]
      .some((dt) => dt.textContent === 'Revision' && dt.nextElementSibling?.textContent === String(rev)), pushed.body.revision, { timeout: 30_000 });
    check(marker && await page.evaluate(() => window.__sameDocument === true), 'the page was reloaded');
    check((await revision.innerText()).trim() === String(pushed.body.revision), 'the revision shown is not the new one');
  });

  await step('policies: arguments and defaults; a bad .wasm is refused with the server\'s message verbatim', async () => {
    await visit('#/policies', 'Policies');
    const row = page.locator('tr[data-policy="LowNodeUtilization"]');
    await row.locator('summary', { hasText: 'Arguments of LowNodeUtilization' }).click();
    const args = row.locator('table.args-table');
    await args.waitFor();
    check((await args.innerText()).includes('thresholds'), 'the args table lacks thresholds');
    const bytes = Buffer.from('this is not a WebAssembly module');
    const direct = await rawApi('POST', '/policies', bytes, 'application/wasm');
    check(direct.status >= 400, `the API took a bad module: ${direct.status}`);
    const alert = page.locator('#upload-result [role="alert"]');
    await tolerating(ANY_4XX, async () => {
      await page.getByLabel('WebAssembly component (.wasm)').setInputFiles({ name: 'bad.wasm', mimeType: 'application/wasm', buffer: bytes });
      await page.getByRole('button', { name: 'Upload policy' }).click();
      await alert.waitFor();
    });
    const message = (await alert.locator('.error-message').innerText()).trim();
    check(message === direct.body.message.trim(), `shown "${message}", the server says "${direct.body.message}"`);
    check((await alert.innerText()).includes(direct.body.code), 'the error code is not shown');
    await axe('policies');
    await screenshot('policies');
    check(WASM, 'no valid .wasm to upload: set REBALANCER_POLICY_WASM or CARGO_TARGET_DIR');
    {
      await page.getByLabel('WebAssembly component (.wasm)').setInputFiles(WASM);
      await page.getByRole('button', { name: 'Upload policy' }).click();
      await page.locator('#flash', { hasText: /Policy .* (registered|replaced)/ }).waitFor({ timeout: 60_000 });
      const uploaded = (await api('GET', '/policies')).body.items.filter((p) => !p.builtin);
      check(uploaded.length >= 1, 'no uploaded policy listed');
      await page.locator(`tr[data-policy="${uploaded[0].name}"]`).waitFor();
    }
  });

  await step('schedules: create, pause, edit, delete', async () => {
    await visit('#/admin/schedules', 'Schedules');
    await page.getByLabel('Cluster', { exact: true }).selectOption(BIG);
    await page.getByLabel('Profile', { exact: true }).selectOption(PROFILE);
    await page.getByLabel('Every (seconds)').fill('86400');
    await page.getByLabel('Dry runs (never approvable)').check();
    await page.getByRole('button', { name: 'Create schedule' }).click();
    await page.locator('#flash', { hasText: /Schedule #\d+ created/ }).waitFor();
    const created = (await api('GET', '/schedules')).body.items.find((s) => s.cluster === BIG);
    check(created && created.intervalSeconds === 86400 && created.dryRun, `stored: ${JSON.stringify(created)}`);
    const row = page.locator(`table.schedules tr[data-id="${created.id}"]`);
    await row.getByRole('button', { name: `Pause schedule #${created.id}` }).click();
    await page.locator(`table.schedules tr[data-id="${created.id}"]`).getByRole('button', { name: `Resume schedule #${created.id}` }).waitFor();
    check((await api('GET', `/schedules/${created.id}`)).body.enabled === false, 'not paused on the server');
    await page.getByRole('button', { name: `Edit schedule #${created.id}` }).click();
    await page.getByLabel('Every (seconds)').fill('7200');
    await page.getByRole('button', { name: 'Save schedule' }).click();
    await page.locator('#flash', { hasText: `Schedule #${created.id} saved` }).waitFor();
    check((await api('GET', `/schedules/${created.id}`)).body.intervalSeconds === 7200, 'the edit was not stored');
    await axe('schedules');
    await screenshot('schedules');
    await page.getByRole('button', { name: `Delete schedule #${created.id}` }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Delete' }).click();
    await page.locator(`table.schedules tr[data-id="${created.id}"]`).waitFor({ state: 'detached' });
    check((await api('GET', `/schedules/${created.id}`)).status === 404, 'the schedule was not deleted');
  });

  await step('arbitration: a refused knob is shown at its field; global and per-cluster knobs are stored', async () => {
    const original = (await api('GET', '/arbitration')).body;
    try {
      await visit('#/admin/arbitration', 'Arbitration');
      await page.locator('#global--evictBurst').fill('0');
      await tolerating(ANY_4XX, async () => {
        await page.locator('#global--evictBurst').press('Enter');
        await page.locator('#global--evictBurst-error', { hasText: 'evictBurst' }).waitFor();
      });
      await page.locator('#global--evictBurst').fill('3');
      await page.locator('#global--evictQPS').fill('4.5');
      await page.locator('#global--evictQPS').press('Enter');
      await page.locator('#flash', { hasText: 'Global arbitration knobs saved' }).waitFor();
      const stored = (await api('GET', '/arbitration')).body;
      check(stored.evictBurst === 3 && stored.evictQPS === 4.5, `stored: ${JSON.stringify(stored)}`);
      await page.getByRole('button', { name: `Edit the knobs of cluster ${BIG}` }).click();
      const prefix = `cluster-${BIG}`;
      await page.locator(`#${prefix}--maxMigratingPerNode`).fill('5');
      await page.locator(`#${prefix}--maxMigratingPerNode`).press('Enter');
      await page.locator('#flash', { hasText: `Cluster ${BIG} has its own` }).waitFor();
      const own = (await api('GET', `/clusters/${BIG}/arbitration`)).body;
      check(own.source === 'cluster' && own.config.maxMigratingPerNode === 5, `cluster knobs: ${JSON.stringify(own)}`);
      await axe('arbitration');
      await screenshot('arbitration');
      await page.getByRole('button', { name: `Edit the knobs of cluster ${BIG}` }).click();
      await page.getByRole('button', { name: 'Follow the global knobs' }).click();
      await page.getByRole('dialog').getByRole('button', { name: 'Follow global' }).click();
      await page.locator('#flash', { hasText: `Cluster ${BIG} follows the global knobs` }).waitFor();
      check((await api('GET', `/clusters/${BIG}/arbitration`)).body.source === 'global', 'the cluster still has its own knobs');
    } finally {
      await api('PUT', '/arbitration', { body: original });
    }
  });

  await step('retention: the settings in force, changed by an admin', async () => {
    const r = await api('GET', '/retention');
    check(r.status === 200, `GET /retention answered ${r.status}`);
    await visit('#/admin/retention', 'Retention');
    const input = page.locator('#retention-audit');
    await input.waitFor();
    check((await page.locator('#retention-audit-help').innerText()).includes(r.body.effective.audit), 'the audit keep time in force is not shown');
    const before = await input.inputValue();
    await input.fill('soon');
    await tolerating(ANY_4XX, async () => {
      await page.getByRole('button', { name: 'Save retention' }).click();
      await page.locator('#retention-audit-error', { hasText: 'audit' }).waitFor();
    });
    await input.fill('400d');
    await page.getByRole('button', { name: 'Save retention' }).click();
    await page.locator('#flash', { hasText: 'Retention saved' }).waitFor();
    const stored = (await api('GET', '/retention')).body;
    check(stored.effective.audit === '400d' && stored.overrides.audit === '400d', `stored: ${JSON.stringify(stored)}`);
    await page.locator('#retention-audit-help', { hasText: 'overridden' }).waitFor();
    await axe('retention');
    await screenshot('retention');
    await page.locator('#retention-audit').fill(before);
    await page.getByRole('button', { name: 'Save retention' }).click();
    // The flash of the save before may still be up: wait for the server instead.
    let restored = null;
    for (let i = 0; i < 50 && restored !== r.body.effective.audit; i += 1) {
      await page.waitForTimeout(100);
      restored = (await api('GET', '/retention')).body.effective.audit;
    }
    check(restored === r.body.effective.audit, `the audit keep time was not restored: ${restored}`);
  });

  await step('webhooks: a hook with its state, a test delivery and its deliveries', async () => {
    // 192.0.2.1 (TEST-NET-1) is a public address nothing answers: the delivery stays pending.
    const created = await api('POST', '/webhooks', {
      body: { url: 'http://192.0.2.1/hook', events: ['run.finished'], secret: `secret-${SUFFIX}-0123456789`, description: 'ui test' },
    });
    check(created.status === 201, `POST /webhooks answered ${created.status}: ${JSON.stringify(created.body)}`);
    try {
      await visit('#/admin/webhooks', 'Webhooks');
      const row = page.locator(`tr[data-id="${created.body.id}"]`);
      await row.waitFor();
      check((await row.innerText()).includes('enabled'), 'the hook is not shown enabled');
      await row.getByRole('button', { name: 'Send test delivery to http://192.0.2.1/hook' }).click();
      await page.locator('#flash', { hasText: 'Test delivery queued' }).waitFor();
      await page.locator(`#deliveries-${created.body.id}`).waitFor();
      await page.locator('table.deliveries td', { hasText: 'webhook.test' }).first().waitFor();
      await axe('webhooks');
      await screenshot('webhooks');
    } finally {
      await api('DELETE', `/webhooks/${created.body.id}`);
    }
  });

  let viewerToken = null;
  await step('tokens: the secret is shown once, with a copy button; revoke', async () => {
    await visit('#/admin/tokens', 'API tokens');
    const name = `viewer-${SUFFIX}`;
    await page.getByLabel('Name').fill(name);
    await page.getByLabel('Role').selectOption('viewer');
    await page.getByRole('button', { name: 'Create token' }).click();
    const secret = page.getByLabel('Token', { exact: true });
    await secret.waitFor();
    viewerToken = await secret.inputValue();
    check(/^rb_/.test(viewerToken), `secret shown: ${viewerToken}`);
    check((await api('GET', '/clusters', { token: viewerToken })).status === 200, 'the shown secret does not work');
    await page.getByRole('button', { name: 'Copy token' }).click();
    await page.getByText(/Copied to the clipboard|press Ctrl\+C/).waitFor();
    const clip = await page.evaluate(() => navigator.clipboard.readText().catch(() => null));
    if (clip !== null) check(clip === viewerToken, 'the clipboard does not hold the token');
    await page.locator('table.tokens tbody tr', { hasText: name }).waitFor();
    await axe('tokens');
    await screenshot('tokens');
    check((await api('GET', '/tokens')).body.items.find((t) => t.name === name).expiresAt === null, 'the default expiry is not "never"');
    // Shown once: leaving and coming back lists the token but nowhere its secret.
    await visit('#/admin', 'Administration');
    await visit('#/admin/tokens', 'API tokens');
    await page.locator('table.tokens tbody tr', { hasText: name }).waitFor();
    const onPage = await page.evaluate((secretText) => document.body.innerText.includes(secretText)
      || [...document.querySelectorAll('input, textarea')].some((el) => el.value.includes(secretText))
      || document.documentElement.outerHTML.includes(secretText), viewerToken);
    check(!onPage, 'the secret is on the page again');
    check(await page.getByLabel('Token', { exact: true }).count() === 0, 'the secret field is shown again');
    // Revoke another one.
    const doomed = (await api('POST', '/tokens', { body: { name: `doomed-${SUFFIX}`, role: 'viewer' } })).body;
    await visit('#/admin/tokens', 'API tokens');
    await page.getByRole('button', { name: `Revoke token doomed-${SUFFIX}` }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Revoke' }).click();
    await page.locator('table.tokens tbody tr', { hasText: `doomed-${SUFFIX}` }).waitFor({ state: 'detached' });
    check((await api('GET', '/clusters', { token: doomed.token })).status === 401, 'the revoked token still works');
  });

  await step('audit log: filter by action and actor, page with Older/Newer', async () => {
    await visit('#/admin/audit?limit=3', 'Audit log');
    await page.locator('table.audit tbody tr').first().waitFor();
    check(await page.locator('table.audit tbody tr').count() === 3, 'limit=3 does not give 3 rows');
    const firstPage = await page.locator('table.audit tbody tr').first().getAttribute('data-id');
    await page.getByRole('button', { name: 'Older' }).click();
    await page.locator(`table.audit tbody tr[data-id="${firstPage}"]`).waitFor({ state: 'detached' });
    await page.getByRole('button', { name: 'Newer' }).click();
    await page.locator(`table.audit tbody tr[data-id="${firstPage}"]`).waitFor();
    await page.getByLabel('Action').fill('token.create');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForURL(/action=token\.create/);
    await page.locator('table.audit tbody tr').first().waitFor();
    const actions = await page.locator('table.audit tbody th code').allInnerTexts();
    check(actions.length > 0 && actions.every((a) => a === 'token.create'), `filtered actions: ${actions.join(', ')}`);
    const expected = (await api('GET', '/audit?action=token.create&limit=3')).body.items.map((e) => String(e.id));
    const shown = await page.locator('table.audit tbody tr').evaluateAll((trs) => trs.map((tr) => tr.dataset.id));
    check(JSON.stringify(shown) === JSON.stringify(expected), `shown ${shown}, the API ${expected}`);
    await page.getByLabel('From (your local time)').fill('2999-01-01T00:00');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.getByText('No entries match these filters.').waitFor();
    await visit('#/admin/audit', 'Audit log');
    await page.locator('table.audit tbody tr').first().waitFor();
    await axe('audit');
    await screenshot('audit');
    await visit('#/admin', 'Administration');
    await axe('admin overview');
    await screenshot('admin');
    await visit('#/clusters', 'Clusters');
    await axe('clusters list');
    await screenshot('clusters');
  });

  await step('a viewer sees no administration actions, and is told why', async () => {
    const viewer = await newPage();
    await signIn(viewerToken, viewer);
    const forbidden = /^(Upload policy|Import profile|Save profile|Delete profile|Save rules|Add a rule|Create schedule|Save|Create token|Revoke|Delete|Pause|Edit|Follow the global)/;
    for (const [hash, heading] of [
      ['#/policies', 'Policies'], ['#/profiles', 'Profiles'], [`#/profiles/${PROFILE}`, `Profile ${PROFILE}`],
      ['#/admin/schedules', 'Schedules'], ['#/admin/arbitration', 'Arbitration'], ['#/admin/retention', 'Retention'],
      ['#/admin/tokens', 'API tokens'], ['#/admin', 'Administration'], [`#/clusters/${BIG}`, `Cluster ${BIG}`],
    ]) {
      await viewer.goto(`${BASE}/${hash}`);
      await viewer.getByRole('heading', { name: heading, level: 1 }).waitFor();
      await viewer.waitForFunction(() => document.querySelector('main')?.getAttribute('aria-busy') !== 'true');
      const buttons = (await viewer.locator('main').getByRole('button').allInnerTexts()).filter((t) => forbidden.test(t.trim()));
      check(buttons.length === 0, `${hash}: a viewer is offered ${buttons.join(', ')}`);
      const runLinks = await viewer.locator('main').getByRole('link', { name: /^Start a run/ }).count();
      check(runLinks === 0, `${hash}: a viewer is offered to start a run`);
      check(await viewer.locator('main input[type="file"], main textarea:not([readonly]):not([disabled])').count() === 0, `${hash}: a viewer is offered an editor`);
      if (hash !== '#/admin') {
        const note = viewer.locator('.role-note').first();
        await note.waitFor();
        check((await note.innerText()).includes('viewer'), `${hash}: the reason does not name the role`);
      }
      await axeCheck(viewer, `${hash} as a viewer`);
    }
    await screenshotBoth(viewer, 'admin-viewer-profile');
    await viewer.close();
  });

  for (const f of figures) log(`figure: ${f}`);
});
