// Browser test of the approval queue (a scenario on ./harness.mjs): an approver's header, newest
// first with the total, superseded decisions (no actions, a link to the newer one), filters,
// pod search and sort in the URL, paging, approve by filter with the preview and what-if, bulk
// reject with a comment, the keyboard path (j/k, a, Enter), the decision page, axe-core on each,
// and screenshots at 1280×800 and 390×844.

import {
  BASE, DESKTOP, PHONE, api, apiOk, axe, check, createToken, log, scenario, screenshot, screenshotBoth, signIn, step,
} from './harness.mjs';

await scenario('queue', async ({ page }) => {
  const rows = page.locator('table.decisions tbody tr');
  const rowIds = () => rows.evaluateAll((trs) => trs.map((tr) => Number(tr.dataset.id)));
  const count = page.locator('#decisions-count');
  const query = (params) => new URLSearchParams(Object.entries(params).filter(([, v]) => v !== '' && v !== undefined)).toString();

  let run1;
  let run2;
  await step('two runs of the demo profile: the second supersedes the first one\'s open proposals', async () => {
    run1 = await apiOk('POST', '/runs', { body: { cluster: 'demo', profile: 'default' } });
    run2 = await apiOk('POST', '/runs', { body: { cluster: 'demo', profile: 'default' } });
    check(run1.proposals > 0 && run2.proposals > 0, `the runs proposed ${run1.proposals} and ${run2.proposals}`);
    const old = await apiOk('GET', `/decisions?${query({ run: run1.id, limit: 1000 })}`);
    const superseded = old.items.filter((d) => d.status === 'superseded');
    check(superseded.length > 0, `no decision of run ${run1.id} is superseded: ${[...new Set(old.items.map((d) => d.status))]}`);
    check(superseded.every((d) => typeof d.supersededBy === 'number'), 'a superseded decision names no newer one');
  });

  let approverName;
  await step('an approver signs in; the header says who and which role', async () => {
    approverName = `ui-approver-${Date.now()}`;
    const token = await createToken('approver', approverName);
    await page.goto(`${BASE}/`);
    await signIn(page, token);
    await page.locator('#who', { hasText: approverName }).waitFor();
    const header = await page.locator('#who').innerText();
    check(header.includes('approver'), `the header does not show the role: ${header}`);
    check(/expires|never/.test(header), `the header does not show the expiry: ${header}`);
  });

  await step('the queue is newest first and shows the total', async () => {
    await page.goto(`${BASE}/#/decisions`);
    await rows.first().waitFor();
    const api1 = await apiOk('GET', '/decisions?limit=100');
    const ids = await rowIds();
    check(ids[0] === api1.items[0].id, `first row #${ids[0]}, the API's newest is #${api1.items[0].id}`);
    check(ids.every((id, i) => i === 0 || id < ids[i - 1]), 'rows are not newest first');
    await page.locator('#decisions-count', { hasText: `of ${api1.total}` }).waitFor();
    log(`queue: ${await count.innerText()}`);
  });

  await step('"Load more" pages by cursor and counts what is shown', async () => {
    const total = Number(await count.getAttribute('data-total'));
    check(total > 100, `only ${total} decisions: cannot page`);
    await page.getByRole('button', { name: 'Load more' }).click();
    await page.locator('#decisions-count', { hasText: `Showing ${Math.min(200, total)} of ${total}` }).waitFor();
    const ids = await rowIds();
    check(new Set(ids).size === ids.length, 'a decision is listed twice after Load more');
  });

  await step('a superseded decision offers no action and links to the newer one', async () => {
    await page.goto(`${BASE}/#/decisions?${query({ run: run1.id, status: 'superseded' })}`);
    await rows.first().waitFor();
    check(await page.locator('table.decisions tbody button').count() === 0, 'a superseded decision offers a button');
    const first = rows.first();
    const newer = first.getByRole('link', { name: /^Newer: #\d+/ });
    const newerId = Number((await newer.innerText()).replace(/\D/g, ''));
    await newer.click();
    await page.getByRole('heading', { name: `Decision #${newerId}` }).waitFor();
    check(page.url().endsWith(`#/decisions/${newerId}`), `the link went to ${page.url()}`);
  });

  let namespace;
  await step('filters and pod search go into the URL and are answered by the server', async () => {
    const open = await apiOk('GET', `/decisions?${query({ run: run2.id, status: 'proposed', limit: 1000 })}`);
    const byNamespace = new Map();
    for (const d of open.items) byNamespace.set(d.pod.namespace, (byNamespace.get(d.pod.namespace) ?? 0) + 1);
    namespace = [...byNamespace.entries()].sort((a, b) => b[1] - a[1])[0][0];
    await page.goto(`${BASE}/#/decisions`);
    await rows.first().waitFor();
    await page.getByLabel('Namespace').fill(namespace);
    await page.getByLabel('Status').selectOption('proposed');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForURL(/namespace=/);
    check(/status=proposed/.test(page.url()), `the status is not in the URL: ${page.url()}`);
    const expected = await apiOk('GET', `/decisions?${query({ namespace, status: 'proposed', limit: 1 })}`);
    await page.locator('#decisions-count', { hasText: `of ${expected.total}` }).waitFor();
    const shown = await page.locator('table.decisions tbody th.pod .ns').allInnerTexts();
    check(shown.every((ns) => ns === `${namespace}/`), `the namespace filter shows ${[...new Set(shown)]}`);

    const sample = open.items.find((d) => d.pod.namespace === namespace);
    const needle = sample.pod.name.slice(0, Math.max(4, sample.pod.name.length - 8)).toUpperCase();
    await page.getByLabel('Pod search').fill(needle);
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForURL(/pod=/);
    await rows.first().waitFor();
    const names = await page.locator('table.decisions tbody th.pod').allInnerTexts();
    check(names.every((n) => n.toLowerCase().includes(needle.toLowerCase())), `pod search "${needle}" shows ${names.join(', ')}`);

    // The same view from its link, sorted oldest first.
    await page.goto(`${BASE}/#/decisions?${query({ namespace, status: 'proposed', sort: 'oldest' })}`);
    await rows.first().waitFor();
    check(await page.getByLabel('Namespace').inputValue() === namespace, 'the namespace is not restored from the URL');
    check(await page.getByLabel('Sort').inputValue() === 'oldest', 'the sort is not restored from the URL');
    const ids = await rowIds();
    check(ids.every((id, i) => i === 0 || id > ids[i - 1]), 'sort=oldest is not oldest first');
  });

  await step('axe-core and screenshots of the queue', async () => {
    await page.goto(`${BASE}/#/decisions?status=proposed`);
    await rows.first().waitFor();
    await axe(page, 'the decisions queue (1280)');
    await page.setViewportSize(PHONE);
    await axe(page, 'the decisions queue (390)');
    const cards = await page.locator('table.decisions thead').evaluate((thead) => getComputedStyle(thead).position);
    check(cards === 'absolute', 'the queue is not shown as cards at 390 px');
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    check(overflow <= 0, `the queue scrolls sideways by ${overflow}px at 390 px`);
    await page.setViewportSize(DESKTOP);
    await screenshotBoth(page, 'decisions');
  });

  await step('approve by filter: the preview counts, lists and simulates exactly those; a comment is kept', async () => {
    await page.goto(`${BASE}/#/decisions?${query({ namespace, run: run2.id, status: 'proposed' })}`);
    await rows.first().waitFor();
    const preview = await apiOk('POST', '/decisions/approve', { body: { namespace, run: run2.id, preview: true } });
    check(preview.preview === true && preview.approved > 0, `the API preview: ${JSON.stringify(preview).slice(0, 300)}`);
    await page.getByRole('button', { name: 'Approve all matching…' }).click();
    const dialog = page.getByRole('dialog', { name: 'Approve all decisions matching the filter' });
    await dialog.getByText(`${preview.approved} decision(s) will be approved`).waitFor();
    const sample = await dialog.locator('.decide-sample li').count();
    check(sample === Math.min(50, preview.approved), `the sample lists ${sample}, expected ${Math.min(50, preview.approved)}`);
    const whatIf = dialog.locator('.whatif');
    await whatIf.first().waitFor({ timeout: 30_000 });
    const moves = await dialog.locator('table.wi-moves tbody tr').count();
    check(moves === Math.min(50, preview.approved), `the what-if lists ${moves} moves for ${preview.approved} approvals`);
    const thresholds = await apiOk('GET', '/clusters/demo/balance?profile=default');
    if (thresholds.thresholds.length) {
      check(await dialog.locator('.wi-mark').count() > 0, 'the profile has thresholds but none is drawn');
    }
    await axe(page, 'the approve-by-filter dialog');
    await screenshot(page, 'approve-by-filter-dialog-1280');
    await dialog.getByLabel(/Comment/).fill('approved by filter in the browser test');
    await dialog.getByRole('button', { name: `Approve ${preview.approved}` }).click();
    await page.locator('[aria-live] p.ok', { hasText: `Approved ${preview.approved} of` }).waitFor();
    const after = await apiOk('GET', `/decisions?${query({ namespace, run: run2.id, status: 'proposed', limit: 1 })}`);
    check(after.total === 0, `${after.total} decisions of the filter are still proposed`);
    const one = await apiOk('GET', `/decisions/${preview.ids?.[0] ?? preview.sample[0].id}`);
    check(one.history.some((t) => t.comment === 'approved by filter in the browser test'), 'the comment is not in the history');
  });

  await step('bulk reject of selected rows with a comment, in one request', async () => {
    await page.goto(`${BASE}/#/decisions?${query({ run: run2.id, status: 'proposed' })}`);
    await rows.first().waitFor();
    const ids = (await rowIds()).slice(0, 2);
    for (const id of ids) await page.locator(`table.decisions tbody tr[data-id="${id}"]`).getByRole('checkbox').check();
    let requests = 0;
    const counter = (request) => { if (/\/api\/v1\/decisions\/reject$/.test(request.url()) && request.method() === 'POST') requests += 1; };
    page.on('request', counter);
    await page.getByRole('button', { name: 'Reject selected (2)' }).click();
    const dialog = page.getByRole('dialog', { name: 'Reject 2 selected decisions' });
    await dialog.getByText('2 decision(s) will be rejected').waitFor();
    await dialog.getByLabel(/Comment/).fill('keep them: maintenance window');
    await dialog.getByRole('button', { name: 'Reject 2' }).click();
    await page.locator('[aria-live] p.ok', { hasText: 'Rejected 2 of 2' }).waitFor();
    page.off('request', counter);
    check(requests === 2, `${requests} reject requests (expected one preview and one reject)`);
    for (const id of ids) {
      const d = await apiOk('GET', `/decisions/${id}`);
      check(d.status === 'rejected', `decision ${id} is ${d.status}`);
      check(d.history.some((t) => t.comment === 'keep them: maintenance window'), `decision ${id} lacks the comment`);
    }
  });

  let keyboardId;
  await step('keyboard: j moves, a opens the approval with its what-if, Enter confirms', async () => {
    await page.goto(`${BASE}/#/decisions?${query({ run: run2.id, status: 'proposed' })}`);
    await rows.first().waitFor();
    const ids = await rowIds();
    await page.locator('h1').click();
    await page.keyboard.press('j');
    await page.keyboard.press('j');
    keyboardId = ids[1];
    const focused = await page.evaluate(() => document.activeElement?.dataset?.id);
    check(Number(focused) === keyboardId, `after j j the focused row is ${focused}, expected ${keyboardId}`);
    await page.keyboard.press('a');
    const dialog = page.getByRole('dialog', { name: `Approve decision #${keyboardId}` });
    await dialog.getByText('1 decision(s) will be approved').waitFor();
    await dialog.locator('.whatif').waitFor({ timeout: 30_000 });
    await page.waitForFunction(() => document.activeElement?.textContent === 'Approve 1');
    await page.keyboard.press('Enter');
    await page.locator('[aria-live] p.ok', { hasText: `Decision #${keyboardId}` }).waitFor();
    const d = await apiOk('GET', `/decisions/${keyboardId}`);
    check(!['proposed', 'rejected'].includes(d.status), `decision ${keyboardId} is ${d.status} after the keyboard approval`);
    check(await page.getByText('Keyboard shortcuts').count() === 1, 'the shortcuts are not documented on the page');
  });

  await step('the decision page: reason, plugin, history with the comment, pod migration', async () => {
    await page.goto(`${BASE}/#/decisions/${keyboardId}`);
    await page.getByRole('heading', { name: `Decision #${keyboardId}` }).waitFor();
    const d = await apiOk('GET', `/decisions/${keyboardId}`);
    const text = await page.locator('main').innerText();
    check(text.includes(d.reason), 'the reason is not shown');
    check(text.includes(d.plugin), 'the plugin is not shown');
    check(text.includes(approverName), 'the history does not name who approved');
    await page.getByRole('link', { name: /^Pod migration #\d+/ }).waitFor();
    await axe(page, 'the decision page');
    await screenshotBoth(page, 'decision', { fullPage: true });
    // An open decision shows its what-if.
    const open = await apiOk('GET', `/decisions?${query({ run: run2.id, status: 'proposed', limit: 1 })}`);
    await page.goto(`${BASE}/#/decisions/${open.items[0].id}`);
    await page.locator('main .whatif').waitFor({ timeout: 30_000 });
    check(await page.locator('table.wi-moves tbody tr').count() === 1, 'the what-if of one decision does not list one move');
    await page.getByRole('button', { name: 'Approve…' }).waitFor();
    await axe(page, 'an open decision with its what-if');
    await screenshotBoth(page, 'decision-open', { fullPage: true });
  });

  await step('the run page simulates the whole run', async () => {
    await page.goto(`${BASE}/#/runs/${run2.id}`);
    await page.locator('main .whatif').waitFor({ timeout: 30_000 });
    const moves = Number(await page.locator('main .whatif').getAttribute('data-moves'));
    check(moves > 0, 'the run\'s what-if has no move');
    await axe(page, 'the run page');
    await screenshotBoth(page, 'run', { fullPage: true });
  });

  await step('an approver may not start runs: the reason is shown', async () => {
    await page.goto(`${BASE}/#/runs`);
    await page.locator('.role-notice', { hasText: 'start runs' }).waitFor();
    check(await page.getByRole('button', { name: 'Start run' }).count() === 0, 'an approver is offered Start run');
    await axe(page, 'the runs page');
    await screenshotBoth(page, 'runs');
  });

  await step('a 409 on a decision that changed meanwhile is shown, not hidden', async () => {
    const status = (await api('GET', '/decisions?status=superseded&limit=1')).body;
    check(status.items.length === 1, 'no superseded decision');
    const refused = await api('POST', `/decisions/${status.items[0].id}/approve`);
    check(refused.status === 409 && refused.body.code === 'superseded', `approving a superseded decision answered ${refused.status} ${JSON.stringify(refused.body)}`);
    check(refused.body.details?.supersededBy === status.items[0].supersededBy, 'the 409 does not name the newer decision');
  });
});
