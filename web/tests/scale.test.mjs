// Browser test of the queue at 10,000 open decisions (a scenario on ./harness.mjs). The decisions
// are made honestly through the API: a generated snapshot of 100 nodes and 10,000 pods in 10
// namespaces is pushed to a new cluster, and a PodLifeTime profile proposes every pod. Prints
// "first rows shown in X ms" and "approve-by-filter of 1,000 in Y ms" (asserted only loosely).

import {
  BASE, TOKEN, apiOk, axe, check, log, scenario, screenshotBoth, signIn, step,
} from './harness.mjs';

const CLUSTER = 'big';
const PROFILE = 'everything-old';
const NODES = 100;
const NAMESPACES = 10;
const PODS_PER_NAMESPACE = 1000;
const PODS = NAMESPACES * PODS_PER_NAMESPACE;
const LOOSE_MS = 10_000;

function snapshot() {
  const items = [];
  for (let n = 0; n < NODES; n += 1) {
    const name = `node-${String(n).padStart(3, '0')}`;
    items.push({
      apiVersion: 'v1', kind: 'Node',
      metadata: { name, uid: `uid-node-${name}`, labels: { 'kubernetes.io/hostname': name }, creationTimestamp: '2020-01-01T00:00:00Z' },
      spec: {},
      status: {
        allocatable: { cpu: '64', memory: '256Gi', pods: '250' },
        capacity: { cpu: '64', memory: '256Gi', pods: '250' },
        conditions: [{ type: 'Ready', status: 'True' }],
      },
    });
  }
  for (let s = 0; s < NAMESPACES; s += 1) {
    const namespace = `team-${s}`;
    items.push({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace, uid: `uid-ns-${namespace}` } });
    for (let i = 0; i < PODS_PER_NAMESPACE; i += 1) {
      const owner = `app-${i % 20}`;
      const name = `${owner}-${String(i).padStart(4, '0')}`;
      const node = `node-${String((s * PODS_PER_NAMESPACE + i) % NODES).padStart(3, '0')}`;
      items.push({
        apiVersion: 'v1', kind: 'Pod',
        metadata: {
          name, namespace, uid: `uid-${namespace}-${name}`, creationTimestamp: '2020-01-01T00:00:00Z', labels: { app: owner },
          ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: owner, uid: `uid-rs-${namespace}-${owner}`, controller: true }],
        },
        spec: {
          nodeName: node,
          containers: [{ name: 'main', image: 'registry.example/app:1', resources: { requests: { cpu: '10m', memory: '16Mi' } } }],
        },
        status: { phase: 'Running', startTime: '2020-01-01T00:00:05Z', conditions: [{ type: 'Ready', status: 'True' }] },
      });
    }
  }
  return { apiVersion: 'v1', kind: 'List', metadata: { resourceVersion: '' }, items };
}

await scenario('scale', async ({ page }) => {
  const rows = page.locator('table.decisions tbody tr');

  await step(`a cluster of ${NODES} nodes and ${PODS} pods; a PodLifeTime run proposes every pod`, async () => {
    await apiOk('PUT', `/clusters/${CLUSTER}/snapshot`, { body: snapshot() });
    await apiOk('PUT', `/profiles/${PROFILE}`, {
      body: {
        apiVersion: 'descheduler/v1alpha2', kind: 'DeschedulerPolicy',
        profiles: [{
          name: PROFILE,
          pluginConfig: [{ name: 'PodLifeTime', args: { maxPodLifeTimeSeconds: 60 } }, { name: 'DefaultEvictor', args: {} }],
          plugins: { deschedule: { enabled: ['PodLifeTime'] } },
        }],
      },
    });
    // Hold the pod migrations of the approvals below before their eviction: this test is about the queue.
    const arbitration = await apiOk('GET', '/arbitration');
    await apiOk('PUT', '/arbitration', { body: { ...arbitration, evictQPS: 0.0001, evictBurst: 1 } });
    const started = Date.now();
    const run = await apiOk('POST', '/runs', { body: { cluster: CLUSTER, profile: PROFILE } });
    log(`the run proposed ${run.proposals} in ${Date.now() - started} ms`);
    check(run.proposals === PODS, `the run proposed ${run.proposals} moves, not ${PODS} (a limit capped it?)`);
    const open = await apiOk('GET', `/decisions?cluster=${CLUSTER}&status=proposed&limit=1`);
    check(open.total === PODS, `${open.total} open decisions, not ${PODS}`);
  });

  let firstRowsMs;
  await step('the queue of 10,000: first rows shown, the total counted', async () => {
    await page.goto(`${BASE}/`);
    await signIn(page, TOKEN);
    await page.getByRole('heading', { level: 1 }).waitFor();
    const started = Date.now();
    await page.evaluate((hash) => { location.hash = hash; }, `#/decisions?cluster=${CLUSTER}&status=proposed`);
    await rows.first().waitFor();
    firstRowsMs = Date.now() - started;
    await page.locator('#decisions-count', { hasText: `of ${PODS}` }).waitFor();
    console.log(`first rows shown in ${firstRowsMs} ms (${PODS} open decisions)`);
    check(firstRowsMs < LOOSE_MS, `first rows took ${firstRowsMs} ms`);
    await page.locator('#select-all').check();
    await page.getByRole('button', { name: `Select all ${PODS} decisions matching the filter` }).click();
    await page.getByRole('button', { name: `Approve selected (all ${PODS} matching)` }).waitFor();
    await page.getByRole('button', { name: /Select only the \d+ shown/ }).click();
    await axe(page, `the queue of ${PODS}`);
    await screenshotBoth(page, 'decisions-10k');
  });

  let approveMs;
  await step('approve by filter of 1,000 (one namespace) with the preview and what-if', async () => {
    await page.goto(`${BASE}/#/decisions?cluster=${CLUSTER}&namespace=team-0&status=proposed`);
    await page.locator('#decisions-count', { hasText: `of ${PODS_PER_NAMESPACE}` }).waitFor();
    const previewStarted = Date.now();
    await page.getByRole('button', { name: 'Approve all matching…' }).click();
    const dialog = page.getByRole('dialog', { name: 'Approve all decisions matching the filter' });
    await dialog.getByText(`${PODS_PER_NAMESPACE} decision(s) will be approved`).waitFor();
    const previewMs = Date.now() - previewStarted;
    await dialog.locator('.whatif').waitFor({ timeout: 60_000 });
    const whatIfMs = Date.now() - previewStarted;
    const moves = Number(await dialog.locator('.whatif').getAttribute('data-moves'));
    check(moves === PODS_PER_NAMESPACE, `the what-if simulated ${moves} moves, not ${PODS_PER_NAMESPACE}`);
    const started = Date.now();
    await dialog.getByRole('button', { name: `Approve ${PODS_PER_NAMESPACE}` }).click();
    await page.locator('[aria-live] p.ok', { hasText: `Approved ${PODS_PER_NAMESPACE} of ${PODS_PER_NAMESPACE}` }).waitFor({ timeout: 60_000 });
    approveMs = Date.now() - started;
    console.log(`approve-by-filter of 1,000 in ${approveMs} ms (preview counted in ${previewMs} ms, what-if of 1,000 moves shown after ${whatIfMs} ms)`);
    check(approveMs < LOOSE_MS, `approving 1,000 by filter took ${approveMs} ms`);
    const left = await apiOk('GET', `/decisions?cluster=${CLUSTER}&namespace=team-0&status=proposed&limit=1`);
    check(left.total === 0, `${left.total} of team-0 still proposed`);
    await page.locator('#decisions-count', { hasText: 'Showing 0 of 0' }).waitFor().catch(() => {});
  });
});
