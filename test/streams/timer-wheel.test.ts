/**
 * The timer wheel (src/streams/timer-wheel.ts, issue 29) on Node's mocked clock: one timer
 * visits every member once per period, the first visit at most one tick early, and a member
 * that leaves is not visited again. No real time passes, so nothing here depends on the host.
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, mock, test } from 'node:test';
import { TimerWheel } from '../../src/streams/timer-wheel.js';

const PERIOD = 800;
const TICK = PERIOD / 8;

beforeEach(() => mock.timers.enable({ apis: ['setInterval'] }));
afterEach(() => mock.timers.reset());

function recordingWheel(): { wheel: TimerWheel<string>; visits: string[] } {
  const visits: string[] = [];
  return { wheel: new TimerWheel<string>(PERIOD, (member) => visits.push(member)), visits };
}

test('a member is visited once per period, the first time one period after it joined', () => {
  const { wheel, visits } = recordingWheel();
  wheel.add('a');
  mock.timers.tick(PERIOD - 1);
  assert.deepEqual(visits, []);
  mock.timers.tick(1);
  assert.deepEqual(visits, ['a']);
  mock.timers.tick(PERIOD);
  mock.timers.tick(PERIOD);
  assert.deepEqual(visits, ['a', 'a', 'a']);
});

test('a member that joins between ticks is first visited within the last tick of its period', () => {
  const { wheel, visits } = recordingWheel();
  wheel.add('early');
  mock.timers.tick(TICK + TICK / 2);
  wheel.add('late');
  // 'late' joined 1.5 ticks in: its first visit comes at 9 ticks, 7.5 ticks after it joined.
  mock.timers.tick(PERIOD - TICK - TICK / 2 - 1);
  assert.deepEqual(visits, []);
  mock.timers.tick(1);
  assert.deepEqual(visits, ['early']);
  mock.timers.tick(TICK - 1);
  assert.deepEqual(visits, ['early']);
  mock.timers.tick(1);
  assert.deepEqual(visits, ['early', 'late']);
});

test('many members share the one wheel, each visited once per period', () => {
  const { wheel, visits } = recordingWheel();
  const members = Array.from({ length: 100 }, (_, i) => `m${i}`);
  for (const m of members) {
    wheel.add(m);
    mock.timers.tick(7);
  }
  assert.equal(wheel.size, 100);
  mock.timers.tick(2 * PERIOD);
  for (const m of members) assert.equal(visits.filter((v) => v === m).length, 2, m);
});

test('a member that leaves is not visited again, and adding twice counts once', () => {
  const { wheel, visits } = recordingWheel();
  wheel.add('stay');
  wheel.add('go');
  wheel.add('go');
  assert.equal(wheel.size, 2);
  mock.timers.tick(PERIOD);
  wheel.delete('go');
  wheel.delete('go');
  assert.equal(wheel.size, 1);
  mock.timers.tick(PERIOD);
  assert.deepEqual(visits.sort(), ['go', 'stay', 'stay']);
  wheel.delete('stay');
  assert.equal(wheel.size, 0);
  mock.timers.tick(3 * PERIOD);
  assert.equal(visits.length, 3);
});

test('a member a visit removes is not visited after it, and one a visit adds waits a full turn', () => {
  const visits: string[] = [];
  const wheel: TimerWheel<string> = new TimerWheel<string>(PERIOD, (member) => {
    visits.push(member);
    if (member === 'a') wheel.delete('b');
    if (member === 'a') wheel.add('c');
  });
  wheel.add('a');
  wheel.add('b');
  mock.timers.tick(PERIOD);
  assert.deepEqual(visits, ['a']);
  mock.timers.tick(PERIOD);
  assert.deepEqual(visits, ['a', 'a', 'c']);
  assert.equal(wheel.size, 2);
});
