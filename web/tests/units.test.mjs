// Unit tests of the UI's pure functions, in Node without a browser (run like the browser
// scenarios, by server/tests/api/ui.rs or `node tests/units.test.mjs`): the SSE parser, the
// pod migration timeline, and the role texts.

import assert from 'node:assert/strict';
import { sseParser } from '../ui/live.js';
import { allowed, expiryText, whyNot } from '../ui/session.js';
import { timelineSteps } from '../ui/views/migrations.js';

let failed = 0;
let passed = 0;
function test(name, fn) {
  try {
    fn();
    passed += 1;
    console.log(`[units] ok  ${name}`);
  } catch (err) {
    failed += 1;
    console.error(`[units] FAILED ${name}: ${err.stack ?? err}`);
  }
}

test('the SSE parser joins events split across chunks and CRLF, and skips comments', () => {
  const events = [];
  const comments = [];
  const feed = sseParser((e) => events.push(e), (c) => comments.push(c));
  feed('id: 7\nevent: decis');
  feed('ions\ndata: {"ids":[1,2],');
  feed('"status":"approved"}\n\n: keep-alive\n\nid: 8\r\nevent: reset\r\ndata: {}\r\n\r\n');
  feed('data: line one\ndata: line two\n\n');
  assert.deepEqual(events, [
    { id: '7', type: 'decisions', data: '{"ids":[1,2],"status":"approved"}' },
    { id: '8', type: 'reset', data: '{}' },
    { id: null, type: 'message', data: 'line one\nline two' },
  ]);
  assert.deepEqual(comments, ['keep-alive']);
});

test('the timeline groups events into steps with durations in ms', () => {
  const at = (ms) => new Date(Date.UTC(2026, 0, 1, 0, 0, 0, ms)).toISOString();
  const events = [
    ['Created', 0], ['PassedArbitration', 3], ['CreatingReservation', 9], ['ReservationCreated', 417],
    ['ReservationScheduled', 418], ['Evicting', 420], ['EvictComplete', 635], ['PodBoundReservation', 637],
    ['BoundPodReady', 642], ['Complete', 645],
  ].map(([reason, ms]) => ({ time: at(ms), type: 'Normal', reason, message: '' }));
  const steps = timelineSteps({ createdAt: at(0), finishedAt: at(645), reservationKind: 'Reservation' }, events);
  assert.deepEqual(steps.map((s) => [s.key, s.end - s.start]), [
    ['waiting', 9], ['reservation', 411], ['eviction', 215], ['replacement', 7], ['cleanup', 3],
  ]);
  assert.equal(steps[1].label, 'Reservation');
  const early = timelineSteps({ createdAt: at(0), finishedAt: null }, events.slice(0, 2));
  assert.deepEqual(early.map((s) => s.start !== null), [true, false, false, false, false]);
});

test('role texts say who may not do what, and which role would', () => {
  const viewer = { name: 'alice', role: 'viewer', can: { read: true, approve: false, run: false, abort: false, admin: false } };
  assert.equal(allowed(viewer, 'approve'), false);
  assert.match(whyNot(viewer, 'approve'), /"alice" has the viewer role.*approver or admin role/);
  assert.equal(whyNot({ ...viewer, can: { ...viewer.can, approve: true } }, 'approve'), null);
  assert.equal(allowed(null, 'admin'), true, 'without whoami the server decides');
  assert.equal(expiryText(null), 'never expires');
  assert.equal(expiryText(new Date(Date.now() + 3 * 86_400_000).toISOString()), 'expires in 3 days');
  assert.equal(expiryText(new Date(Date.now() - 1000).toISOString()), 'expired');
});

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
