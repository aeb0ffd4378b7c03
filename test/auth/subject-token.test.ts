/**
 * The caller's own token, kept for token exchange (src/auth/subject-token.ts): no way of
 * printing a request, a caller or an error carries it into a log line or a response.
 */
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { inspect } from 'node:util';
import { test } from 'node:test';
import pino from 'pino';
import { SubjectToken } from '../../src/auth/subject-token.js';

const TOKEN = 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl';

test('JSON, util.inspect, string conversion and pino all show it redacted; reveal() gives it', () => {
  const caller = { principal: { sub: 'alice' }, subjectToken: new SubjectToken(TOKEN) };
  let logged = '';
  const log = pino({ level: 'info' }, new Writable({ write: (chunk, _enc, done) => ((logged += String(chunk)), done()) }));
  log.info({ caller }, 'calling');
  log.info({ token: caller.subjectToken }, `with ${caller.subjectToken}`);
  for (const printed of [JSON.stringify(caller), inspect(caller, { depth: 5 }), String(caller.subjectToken), `${caller.subjectToken}`, logged]) {
    assert.ok(!printed.includes(TOKEN), printed);
    assert.match(printed, /\[redacted\]/);
  }
  assert.equal(caller.subjectToken.reveal(), TOKEN);
});
