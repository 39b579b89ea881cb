// Browser test of the web UI's main flows (a scenario on ./harness.mjs; see there for how to run):
// sign in, clusters and node utilization, start a run, approve / reject decisions (one by one
// and in bulk), the pod migration of an approved decision with its events, the 403 of a viewer
// token, log out, and the 401 of a bad token.

import {
  BASE, DESKTOP, PHONE, TOKEN, api, axe, check, httpStatus, scenario, screenshot as shoot, screenshotBoth,
  signIn as signInOn, step, tolerating,
} from './harness.mjs';

await scenario('ui', async ({ page }) => {
const screenshot = (name, options) => shoot(page, name, options);
const signIn = (token) => signInOn(page, token);

/** The decision row `id`. */
function decisionRow(id) {
  return page.locator(`table.decisions tbody tr[data-id="${id}"]`);
}

let approvedId = null;
  await step('the page loads with its assets and asks for a token', async () => {
    const response = await page.goto(`${BASE}/`);
    check(response.ok(), `GET / answered ${response.status()}`);
    check((response.headers()['content-type'] ?? '').startsWith('text/html'), 'GET / is not text/html');
    await page.getByRole('heading', { name: 'Sign in to Rebalancer' }).waitFor();
    check(await page.getByRole('navigation', { name: 'Main' }).isHidden(), 'navigation shown before sign-in');
  });

  await step('sign in with the admin token', async () => {
    await signIn(TOKEN);
    await page.getByRole('heading', { name: 'Clusters', level: 1 }).waitFor();
    await page.getByRole('link', { name: 'demo', exact: true }).waitFor();
    check(await page.evaluate(() => sessionStorage.getItem('rebalancer.token')) === TOKEN, 'token not kept in sessionStorage');
  });

  let busiestNode = null;
  await step('the demo cluster shows its nodes with utilization bars', async () => {
    await page.getByRole('link', { name: 'demo', exact: true }).click();
    await page.getByRole('heading', { name: 'Cluster demo' }).waitFor();
    const rows = page.locator('table.nodes tbody tr');
    await rows.first().waitFor();
    const nodes = (await api('GET', '/clusters/demo/nodes')).body.items;
    check(await rows.count() === nodes.length, `${await rows.count()} node rows, the API has ${nodes.length} nodes`);
    check(await page.locator('table.nodes meter').count() === nodes.length * 3, 'not three meters (cpu, memory, pods) per node');
    busiestNode = [...nodes].sort((a, b) => b.percent.cpu - a.percent.cpu)[0];
    const cpuMeter = page.getByRole('row', { name: new RegExp(busiestNode.name.replace(/\./g, '\\.')) }).locator('meter').first();
    const shown = Number(await cpuMeter.getAttribute('value'));
    check(Math.abs(shown - Math.min(busiestNode.percent.cpu, 100)) < 0.01,
      `cpu meter of ${busiestNode.name} shows ${shown}, the API says ${busiestNode.percent.cpu}`);
    check(shown > 0, 'the busiest node shows 0% cpu');
    await page.getByLabel('Sort by').selectOption('cpu');
    const firstNode = await page.locator('table.nodes tbody tr th').first().innerText();
    check(firstNode === busiestNode.name, `sorted by cpu, ${firstNode} comes first, not ${busiestNode.name}`);
  });

  await step('a node lists its pods', async () => {
    await page.getByRole('link', { name: busiestNode.name, exact: true }).click();
    await page.getByRole('heading', { name: `Node ${busiestNode.name}` }).waitFor();
    const podRows = page.locator('main table tbody tr');
    await podRows.first().waitFor();
    check(await podRows.count() === busiestNode.podCount, `${await podRows.count()} pod rows, the node has ${busiestNode.podCount}`);
  });

  let runId = null;
  await step('start a run of the default profile on the demo cluster', async () => {
    await page.getByRole('link', { name: 'Runs', exact: true }).click();
    await page.getByRole('heading', { name: 'Runs', level: 1 }).waitFor();
    await page.getByLabel('Cluster').selectOption('demo');
    await page.getByLabel('Profile').selectOption('default');
    check(!(await page.getByLabel('Dry run').isChecked()), 'dry run is checked by default');
    await page.getByRole('button', { name: 'Start run' }).click();
    const result = page.locator('.result p.ok');
    await result.waitFor({ timeout: 120_000 });
    const text = await result.innerText();
    const match = /Run #(\d+) succeeded: (\d+) proposal/.exec(text);
    check(match, `unexpected run result: ${text}`);
    runId = Number(match[1]);
    check(Number(match[2]) > 0, 'the demo run proposed nothing');
    await page.getByRole('link', { name: 'See the run' }).click();
    await page.getByRole('heading', { name: `Run #${runId}` }).waitFor();
    const policyRows = page.locator('main table tbody tr');
    await policyRows.first().waitFor();
    const run = (await api('GET', `/runs/${runId}`)).body;
    check(await policyRows.count() === run.report.policies.length,
      `${await policyRows.count()} policy rows, the run has ${run.report.policies.length} policies`);
    check((await policyRows.first().innerText()).includes('ms'), 'no per-policy duration shown');
    await screenshot('run', { fullPage: true });
  });

  const decided = {};
  await step('the run\'s decisions appear; approve one and reject one with a comment', async () => {
    await page.getByRole('link', { name: 'Review decisions' }).click();
    await page.getByRole('heading', { name: 'Decisions', level: 1 }).waitFor();
    check(await page.getByLabel('Run').inputValue() === String(runId), 'the run filter is not set');
    const rows = page.locator('table.decisions tbody tr');
    await rows.first().waitFor();
    const ids = await rows.evaluateAll((trs) => trs.map((tr) => Number(tr.dataset.id)));
    check(ids.length >= 4, `only ${ids.length} decisions shown`);
    const [first, second] = ids;

    await decisionRow(first).getByRole('button', { name: /^Approve decision/ }).click();
    const approveDialog = page.getByRole('dialog', { name: `Approve decision #${first}` });
    await approveDialog.waitFor();
    await approveDialog.getByText('1 decision(s) will be approved').waitFor();
    await approveDialog.getByRole('button', { name: 'Approve 1' }).click();
    await page.locator('[aria-live] p.ok', { hasText: `Decision #${first}` }).first().waitFor();
    await decisionRow(first).locator('.badge:not(.badge-proposed)').waitFor();
    const afterApprove = (await decisionRow(first).locator('.badge').innerText()).trim();
    check(afterApprove !== 'proposed', 'the approved decision still shows proposed');
    const stored = (await api('GET', `/decisions/${first}`)).body;
    check(stored.status !== 'proposed' && stored.status !== 'rejected', `decision ${first} is ${stored.status} on the server`);
    decided.approved = first;
    approvedId = first;

    await decisionRow(second).getByRole('button', { name: /^Reject decision/ }).click();
    const rejectDialog = page.getByRole('dialog', { name: `Reject decision #${second}` });
    await rejectDialog.waitFor();
    await rejectDialog.getByLabel(/Comment/).fill('keep it: this node is being drained by hand');
    await rejectDialog.getByRole('button', { name: 'Reject 1' }).click();
    await decisionRow(second).locator('.badge-rejected').waitFor();
    check((await api('GET', `/decisions/${second}`)).body.status === 'rejected', `decision ${second} is not rejected on the server`);
    decided.rejected = second;
    await page.locator('[aria-live] p.ok', { hasText: `Decision #${second}` }).first().waitFor();
  });

  await step('bulk-approve two selected decisions', async () => {
    const proposedRows = page.locator('table.decisions tbody tr[data-status="proposed"]');
    const ids = await proposedRows.evaluateAll((trs) => trs.slice(0, 2).map((tr) => Number(tr.dataset.id)));
    check(ids.length === 2, 'fewer than two proposed decisions left');
    for (const id of ids) await decisionRow(id).getByRole('checkbox').check();
    const bulk = page.getByRole('button', { name: 'Approve selected (2)' });
    await bulk.click();
    const dialog = page.getByRole('dialog', { name: 'Approve 2 selected decisions' });
    await dialog.getByText('2 decision(s) will be approved').waitFor();
    await dialog.getByRole('button', { name: 'Approve 2' }).click();
    for (const id of ids) {
      await decisionRow(id).locator('.badge:not(.badge-proposed)').waitFor();
      const status = (await api('GET', `/decisions/${id}`)).body.status;
      check(!['proposed', 'rejected'].includes(status), `bulk-approved decision ${id} is ${status} on the server`);
    }
    await screenshot('decisions');
  });

  await step('filter decisions by status and plugin', async () => {
    await page.getByLabel('Status').selectOption('rejected');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForURL(/status=rejected/);
    await page.waitForFunction(() => {
      const badges = [...document.querySelectorAll('table.decisions tbody .badge')];
      return badges.length > 0 && badges.every((b) => b.textContent.trim() === 'rejected');
    }, null, { timeout: 20_000 }).catch(() => {});
    await decisionRow(decided.rejected).waitFor();
    const statuses = await page.locator('table.decisions tbody .badge').allInnerTexts();
    check(statuses.every((s) => s.trim() === 'rejected'), `status filter shows ${statuses.join(', ')}`);
    const plugin = (await api('GET', `/decisions/${decided.rejected}`)).body.plugin;
    await page.getByLabel('Plugin').selectOption(plugin);
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForURL(/plugin=/);
    await decisionRow(decided.rejected).waitFor();
  });

  await step('the approved decision\'s pod migration shows its phase and events', async () => {
    await page.goto(`${BASE}/#/pod-migrations?decision=${approvedId}`);
    await page.getByRole('heading', { name: 'Pod migrations', level: 1 }).waitFor();
    const row = page.locator('main table tbody tr').first();
    await row.waitFor({ timeout: 60_000 });
    const listed = (await api('GET', `/pod-migrations?decision=${approvedId}`)).body.items;
    check(listed.length >= 1, `the API lists no pod migration for decision ${approvedId}`);
    check((await row.innerText()).includes(`#${approvedId}`), 'the row does not name the decision');
    await row.getByRole('link').first().click();
    await page.getByRole('heading', { name: `Pod migration #${listed[0].id}` }).waitFor();
    const phase = (await page.locator('.facts .badge').first().innerText()).trim();
    check(['Pending', 'Running', 'Succeeded', 'Failed', 'Aborted'].includes(phase), `unknown phase shown: ${phase}`);
    const events = page.locator('table.events tbody tr');
    await events.first().waitFor({ timeout: 60_000 });
    const detail = (await api('GET', `/pod-migrations/${listed[0].id}`)).body;
    check(detail.events.length >= 1, 'the API has no events');
    await screenshot('pod-migration', { fullPage: true });
  });

  await step('abort a pod migration that waits for the eviction rate limit', async () => {
    // Hold new pod migrations before their eviction: one eviction per ~3 hours.
    const original = (await api('GET', '/arbitration')).body;
    const slowed = await api('PUT', '/arbitration', { body: { ...original, evictQPS: 0.0001, evictBurst: 1 } });
    check(slowed.status === 200, `slowing evictions answered ${slowed.status}: ${JSON.stringify(slowed.body)}`);
    try {
      await page.goto(`${BASE}/#/decisions?run=${runId}&status=proposed`);
      const row = page.locator('table.decisions tbody tr').first();
      await row.waitFor();
      const id = Number(await row.getAttribute('data-id'));
      await row.getByRole('button', { name: /^Approve decision/ }).click();
      await page.getByRole('dialog', { name: `Approve decision #${id}` }).getByRole('button', { name: 'Approve 1' }).click();
      // The row leaves this list of proposed decisions once approved.
      await page.locator('[aria-live] p.ok', { hasText: `Decision #${id}` }).waitFor();
      await page.goto(`${BASE}/#/pod-migrations?decision=${id}`);
      await page.locator('main table tbody tr a').first().click();
      const abort = page.getByRole('button', { name: 'Abort this pod migration' });
      await abort.waitFor();
      await screenshot('pod-migration-waiting');
      await abort.click();
      await page.getByRole('dialog', { name: /^Abort pod migration/ }).getByRole('button', { name: 'Abort', exact: true }).click();
      await page.locator('.facts .badge-aborted').waitFor();
      check(await abort.isHidden(), 'the abort button is still offered after the abort');
      const migrationId = Number(/#\/pod-migrations\/(\d+)/.exec(page.url())[1]);
      const stored = (await api('GET', `/pod-migrations/${migrationId}`)).body;
      check(stored.phase === 'Aborted', `pod migration ${migrationId} is ${stored.phase} on the server`);
      await page.locator('table.events tbody tr', { hasText: 'Abort' }).first().waitFor();
    } finally {
      await api('PUT', '/arbitration', { body: original });
    }
  });

  await step('a dry run\'s decisions can be read but not approved', async () => {
    await page.goto(`${BASE}/#/runs`);
    await page.getByLabel('Dry run').check();
    await page.getByRole('button', { name: 'Start run' }).click();
    const result = page.locator('.result p.ok');
    await result.waitFor({ timeout: 120_000 });
    const dryRunId = Number(/Run #(\d+)/.exec(await result.innerText())[1]);
    const run = (await api('GET', `/runs/${dryRunId}`)).body;
    check(run.dryRun === true, `run ${dryRunId} is not a dry run on the server`);
    await page.getByRole('link', { name: 'Review its decisions' }).click();
    await page.getByText(`Run #${dryRunId} was a dry run`).waitFor();
    await page.locator('table.decisions tbody tr').first().waitFor();
    check(await page.locator('table.decisions tbody button').count() === 0, 'a dry run\'s decision offers approve/reject');
  });

  await step('every view of the queue and pod migrations: axe-core, nothing clipped at 1280, cards at 390', async () => {
    const migration = (await api('GET', `/pod-migrations?decision=${approvedId}`)).body.items[0];
    const views = [
      ['runs', '#/runs', 'table.runs tbody tr'],
      ['run', `#/runs/${runId}`, 'main .whatif, main section .error'],
      ['decisions', `#/decisions?run=${runId}`, 'table.decisions tbody tr'],
      ['decision', `#/decisions/${approvedId}`, 'table.history tbody tr'],
      ['pod-migrations', '#/pod-migrations', 'table.migrations tbody tr'],
      ['pod-migration', `#/pod-migrations/${migration.id}`, 'ol.timeline li'],
    ];
    for (const [name, hash, ready] of views) {
      await page.setViewportSize(DESKTOP);
      await page.goto(`${BASE}/${hash}`);
      await page.locator(ready).first().waitFor({ timeout: 30_000 });
      await axe(page, `${name} at 1280`);
      const clipped = await page.evaluate(() => {
        const width = document.documentElement.clientWidth;
        const out = [...document.querySelectorAll('main *')].filter((el) => {
          const box = el.getBoundingClientRect();
          return box.width > 0 && box.right > width + 1 && !el.closest('.table-wrap');
        });
        const wraps = [...document.querySelectorAll('main .table-wrap')].filter((w) => w.scrollWidth > w.clientWidth + 1);
        return [...out.slice(0, 3).map((el) => `${el.tagName.toLowerCase()}.${el.className}`), ...wraps.map((w) => `a table wider than its box (${w.scrollWidth} > ${w.clientWidth})`)];
      });
      check(clipped.length === 0, `${name} at 1280 px: clipped or scrolling sideways: ${clipped.join(', ')}`);
      await page.setViewportSize(PHONE);
      await axe(page, `${name} at 390`);
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      check(overflow <= 0, `${name} scrolls sideways by ${overflow}px at 390 px`);
      const tables = await page.locator('main table.cards thead').evaluateAll((heads) => heads.map((t) => getComputedStyle(t).position));
      check(tables.every((p) => p === 'absolute'), `${name}: a table is not shown as cards at 390 px`);
      await screenshotBoth(page, `view-${name}`);
    }
    await page.setViewportSize(DESKTOP);
  });

  await step('the focus ring has at least 3:1 contrast against the page', async () => {
    await page.goto(`${BASE}/#/decisions`);
    await page.locator('table.decisions tbody tr').first().waitFor();
    await page.locator('main[aria-busy="false"]').waitFor();
    const input = page.locator('#filter-run');
    await input.focus();
    await page.waitForFunction(() => document.activeElement?.id === 'filter-run');
    const ring = await input.evaluate((el) => {
      const style = getComputedStyle(el);
      const parse = (c) => c.match(/\d+(\.\d+)?/g).slice(0, 3).map(Number);
      const lum = ([r, g, b]) => {
        const f = (v) => { const x = v / 255; return x <= 0.03928 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4; };
        return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
      };
      const ratio = (a, b) => { const [hi, lo] = [lum(a), lum(b)].sort((x, y) => y - x); return (hi + 0.05) / (lo + 0.05); };
      const ringColor = parse(style.outlineColor);
      return {
        width: parseFloat(style.outlineWidth),
        style: style.outlineStyle,
        ratios: ['rgb(255,255,255)', getComputedStyle(document.documentElement).backgroundColor, 'rgb(230,238,247)']
          .map((bg) => ratio(ringColor, parse(bg))),
      };
    });
    check(ring.style !== 'none' && ring.width >= 2, `the focus ring is ${ring.width}px ${ring.style}`);
    check(ring.ratios.every((r) => r >= 3), `focus ring contrast ${ring.ratios.map((r) => r.toFixed(2)).join(', ')} (needs 3:1)`);
  });

  await step('the queue header row sticks while the rows scroll', async () => {
    await page.goto(`${BASE}/#/decisions`);
    await page.locator('table.decisions tbody tr').nth(20).waitFor();
    const stuck = await page.evaluate(() => {
      const wrap = document.querySelector('table.decisions').closest('.table-wrap');
      wrap.scrollIntoView();
      wrap.scrollTop = 600;
      const th = document.querySelector('table.decisions thead th').getBoundingClientRect();
      return { header: th.top, wrap: wrap.getBoundingClientRect().top, scrolled: wrap.scrollTop };
    });
    check(stuck.scrolled > 0, 'the table box does not scroll');
    check(Math.abs(stuck.header - stuck.wrap) <= 2, `the header row is at ${stuck.header}, its box at ${stuck.wrap}: it does not stick`);
  });

  await step('a viewer sees who they are, the reasons, and no approve or reject', async () => {
    const name = `ui-viewer-${Date.now()}`;
    const created = await api('POST', '/tokens', { body: { name, role: 'viewer' } });
    check(created.status === 201, `creating a viewer token answered ${created.status}: ${JSON.stringify(created.body)}`);
    await page.getByRole('button', { name: 'Log out' }).click();
    await signIn(created.body.token);
    await page.getByRole('button', { name: 'Log out' }).waitFor();
    const who = page.locator('#who');
    await who.getByText(name).waitFor();
    check((await who.innerText()).includes('viewer'), `the header does not name the role: ${await who.innerText()}`);
    await page.goto(`${BASE}/#/decisions?run=${runId}&status=proposed`);
    const row = page.locator('table.decisions tbody tr').first();
    await row.waitFor();
    check(await page.locator('table.decisions tbody button').count() === 0, 'a viewer is offered approve/reject buttons');
    check(await page.locator('table.decisions tbody input[type="checkbox"]').count() === 0, 'a viewer is offered selection');
    check(await page.getByRole('button', { name: /Approve selected/ }).count() === 0, 'a viewer is offered bulk approve');
    const notice = page.locator('.role-notice');
    await notice.waitFor();
    check(/viewer role.*approver or admin/.test(await notice.innerText()), `the notice does not say why: ${await notice.innerText()}`);
    check((await row.locator('td.reason').innerText()).length > 5, 'the decision reason is not shown to a viewer');
    await page.goto(`${BASE}/#/runs`);
    await page.locator('.role-notice', { hasText: 'start runs' }).waitFor();
    check(await page.getByRole('button', { name: 'Start run' }).count() === 0, 'a viewer is offered Start run');
    await screenshot('viewer-decisions');
  });

  await step('the layout works at 800 px', async () => {
    await page.setViewportSize({ width: 800, height: 900 });
    await page.goto(`${BASE}/#/clusters/demo`);
    await page.locator('table.nodes tbody tr').first().waitFor();
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    check(overflow <= 0, `the page scrolls sideways by ${overflow}px at 800px`);
    await screenshot('clusters-800');
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  await step('log out, then a bad token shows the 401 message', async () => {
    await page.getByRole('button', { name: 'Log out' }).click();
    await page.getByRole('heading', { name: 'Sign in to Rebalancer' }).waitFor();
    check(await page.evaluate(() => sessionStorage.getItem('rebalancer.token')) === null, 'token kept after logout');
    await tolerating(httpStatus(401), async () => {
      await signIn('not-a-valid-token');
      const alert = page.getByRole('alert').filter({ hasText: 'Not signed in (401)' });
      await alert.waitFor();
      check(await page.getByRole('navigation', { name: 'Main' }).isHidden(), 'navigation shown with a bad token');
    });
    await screenshot('login-401');
  });

});
