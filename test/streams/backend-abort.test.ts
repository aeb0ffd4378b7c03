/**
 * A relay's backend abort signal (src/streams/backend-abort.ts, issue 29): made when a backend
 * request asks for it, let go when none is in flight, and aborted whenever it is asked for
 * after the relay was stopped — so a stop never leaves a backend request running.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BackendAbort } from '../../src/streams/backend-abort.js';

test('the signal a request holds is aborted by abort()', () => {
  const abort = new BackendAbort();
  const signal = abort.signal;
  assert.equal(abort.signal, signal, 'the same signal while it is held');
  assert.equal(signal.aborted, false);
  abort.abort();
  assert.equal(signal.aborted, true);
  assert.equal(abort.aborted, true);
});

test('after release a later request gets a new signal, which abort() still reaches', () => {
  const abort = new BackendAbort();
  const first = abort.signal;
  abort.release();
  const second = abort.signal;
  assert.notEqual(second, first, 'the released controller is not kept');
  abort.abort();
  assert.equal(second.aborted, true);
  assert.equal(first.aborted, false, 'the released one belonged to a finished request');
});

test('a signal asked for after abort() is already aborted, released or not', () => {
  const abort = new BackendAbort();
  abort.abort();
  assert.equal(abort.signal.aborted, true);
  abort.release();
  assert.equal(abort.signal.aborted, true);
  const fresh = new BackendAbort();
  assert.equal(fresh.aborted, false);
  fresh.abort();
  fresh.release();
  assert.equal(fresh.signal.aborted, true);
});
