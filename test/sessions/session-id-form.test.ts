/**
 * The form of a session id the gateway looks up (sessions/session-service.ts
 * `isSessionIdForm`): exactly what `newSessionId` issues — 43 base64url characters — and
 * nothing else, checked by a loop instead of a regular expression since issue 29.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { isSessionIdForm, newSessionId } from '../../src/sessions/session-service.js';

describe('isSessionIdForm', () => {
  test('every id the gateway issues has the form', () => {
    for (let i = 0; i < 1000; i++) assert.ok(isSessionIdForm(newSessionId()));
  });

  test('the whole base64url alphabet, and only it, at 43 characters', () => {
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    assert.ok(isSessionIdForm(alphabet.slice(0, 43)));
    assert.ok(isSessionIdForm(alphabet.slice(21, 64)));
    const base = 'a'.repeat(42);
    for (const c of ['+', '/', '=', ' ', '.', ':', '\u00e9', '\u0000', '`', '[', '@', '{']) assert.equal(isSessionIdForm(base + c), false, JSON.stringify(c));
  });

  test('any other length is refused', () => {
    assert.equal(isSessionIdForm(''), false);
    assert.equal(isSessionIdForm('a'.repeat(42)), false);
    assert.equal(isSessionIdForm('a'.repeat(44)), false);
  });
});
