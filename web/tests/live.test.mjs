// Browser test of the live updates (a scenario on ./harness.mjs): the header's indicator, lists
// that follow changes made elsewhere, a dropped events stream (aborted with page.route) that is
// shown as stale, retried with backoff and recovered with the change made meanwhile, and a pod
// migration page that survives network errors.

import {
  BASE, TOKEN, apiOk, check, log, scenario, screenshot, signIn, step, tolerating,
} from './harness.mjs';

const EVENTS = '**/api/v1/events**';
/** What Chromium logs for a request the test aborts on purpose. */
const NETWORK_FAILURE = /Failed to load resource: net::ERR_FAILED|net::ERR_INTERNET_DISCONNECTED/;

await scenario('live', async ({ page }) => {
  const indicator = page.locator('#live');
  const liveText = () => indicator.innerText();
  const row = (id) => page.locator(`table.decisions tbody tr[data-id="${id}"]`);

  await step('sign in: the indicator says live', async () => {
    await page.goto(`${BASE}/`);
    await signIn(page, TOKEN);
    await page.locator('#live[data-state="live"]').waitFor();
    check((await liveText()).trim() === 'live', `the indicator says "${await liveText()}"`);
  });

  await step('a run started elsewhere appears in the runs list without a reload', async () => {
    await page.goto(`${BASE}/#/runs`);
    await page.getByRole('heading', { name: 'Runs', level: 1 }).waitFor();
    const run = await apiOk('POST', '/runs', { body: { cluster: 'demo', profile: 'default' } });
    await page.locator(`table.runs tbody tr[data-id="${run.id}"]`).waitFor({ timeout: 10_000 });
  });

  let open;
  await step('a decision approved elsewhere changes in the queue without a reload', async () => {
    open = (await apiOk('GET', '/decisions?status=proposed&limit=20')).items;
    check(open.length >= 3, `only ${open.length} open decisions`);
    await page.goto(`${BASE}/#/decisions?status=proposed`);
    await row(open[0].id).waitFor();
    const started = Date.now();
    await apiOk('POST', `/decisions/${open[0].id}/approve`, { body: { comment: 'from elsewhere' } });
    await row(open[0].id).waitFor({ state: 'detached', timeout: 10_000 });
    log(`the approval elsewhere left the proposed list after ${Date.now() - started} ms`);
  });

  await step('the events stream drops: stale, retried with backoff, recovered with what changed meanwhile', async () => {
    const attempts = [];
    await tolerating(NETWORK_FAILURE, async () => {
      await page.route(EVENTS, (route) => {
        attempts.push(Date.now());
        return route.abort('failed');
      });
      // A fresh page load: its first connection and every retry fail.
      await page.goto(`${BASE}/#/decisions?status=proposed`);
      await page.reload();
      await row(open[1].id).waitFor();
      await page.locator('#live[data-state="reconnecting"]').waitFor({ timeout: 10_000 });
      await page.locator('#live', { hasText: /reconnecting… stale since \d/ }).waitFor();
      await screenshot(page, 'live-reconnecting');
      // Changed meanwhile, while the page cannot hear of it.
      await apiOk('POST', `/decisions/${open[1].id}/approve`, { body: { comment: 'while the stream was down' } });
      await page.waitForTimeout(4000);
      check(await row(open[1].id).count() === 1, 'the page changed without the stream (is it polling?)');
      check(attempts.length >= 2, `${attempts.length} connection attempts in ~4 s`);
      const gaps = attempts.slice(1).map((t, i) => t - attempts[i]);
      log(`reconnect attempts ${attempts.length}, gaps ${gaps.join(', ')} ms`);
      check(gaps.every((g) => g >= 400), `a retry came after ${Math.min(...gaps)} ms: no backoff`);
      await page.unroute(EVENTS);
    });
    const started = Date.now();
    await page.locator('#live[data-state="live"]').waitFor({ timeout: 40_000 });
    await row(open[1].id).waitFor({ state: 'detached', timeout: 10_000 });
    log(`recovered ${Date.now() - started} ms after the network came back; the change made meanwhile is shown`);
  });

  await step('a pod migration page keeps refreshing through network errors', async () => {
    const original = await apiOk('GET', '/arbitration');
    await apiOk('PUT', '/arbitration', { body: { ...original, evictQPS: 0.0001, evictBurst: 1 } });
    try {
      // Use the one burst token, then the next pod migration waits.
      await apiOk('POST', `/decisions/${open[2].id}/approve`);
      const more = (await apiOk('GET', '/decisions?status=proposed&limit=1')).items[0];
      await apiOk('POST', `/decisions/${more.id}/approve`);
      const migration = (await apiOk('GET', `/pod-migrations?decision=${more.id}`)).items[0];
      await page.goto(`${BASE}/#/pod-migrations/${migration.id}`);
      await page.getByRole('heading', { name: `Pod migration #${migration.id}` }).waitFor();
      await page.locator('ol.timeline').waitFor();
      await tolerating(NETWORK_FAILURE, async () => {
        await page.route(EVENTS, (route) => route.abort('failed'));
        await page.route('**/api/v1/pod-migrations/*', (route) => route.abort('failed'));
        // Reload so that the events stream is cut too and the page polls.
        await page.reload();
        await page.locator('main .error', { hasText: 'Cannot reach the server' }).first().waitFor({ timeout: 20_000 });
        await page.unroute('**/api/v1/pod-migrations/*');
        await page.locator('.facts .badge').first().waitFor({ timeout: 40_000 });
        await apiOk('POST', `/pod-migrations/${migration.id}/abort`, { body: { comment: 'test over' } });
        // Still without the events stream: the page's own polling shows the abort.
        await page.locator('.facts .badge-aborted').waitFor({ timeout: 40_000 });
        await page.unroute(EVENTS);
      });
      await page.locator('#live[data-state="live"]').waitFor({ timeout: 40_000 });
    } finally {
      await apiOk('PUT', '/arbitration', { body: original });
    }
  });
});
