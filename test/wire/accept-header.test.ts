/**
 * Reading the request headers every MCP POST carries (wire/protocol.ts `accepts`,
 * wire/headers.ts `mediaTypeOf`), now read in place rather than split (issue 29): the same
 * verdicts as RFC 9110 §12.5.1 and §8.3.1 give, for the headers clients send and the odd ones.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { mediaTypeOf } from '../../src/wire/headers.js';
import { accepts } from '../../src/wire/protocol.js';

describe('accepts', () => {
  const both = (accept: string | undefined) => [accepts(accept, 'application/json'), accepts(accept, 'text/event-stream')];

  test('the headers SDK clients send list both types', () => {
    assert.deepEqual(both('application/json, text/event-stream'), [true, true]);
    assert.deepEqual(both('text/event-stream, application/json'), [true, true]);
    assert.deepEqual(both('application/json,text/event-stream'), [true, true]);
  });

  test('media types compare without case, around spaces and tabs, before parameters', () => {
    assert.deepEqual(both('Application/JSON ;q=0.9,\tTEXT/Event-Stream\t'), [true, true]);
    assert.deepEqual(both('application/json; charset=utf-8 , text/event-stream;q=1'), [true, true]);
  });

  test('wildcards match their types', () => {
    assert.deepEqual(both('*/*'), [true, true]);
    assert.deepEqual(both('application/*'), [true, false]);
    assert.deepEqual(both('text/*, application/json'), [true, true]);
  });

  test('a type that only begins like one asked for does not match', () => {
    assert.deepEqual(both('application/json-seq, text/event-streams'), [false, false]);
    assert.deepEqual(both('application/jso, text/event'), [false, false]);
    assert.deepEqual(both('xapplication/json'), [false, false]);
  });

  test('no header, an empty one or empty ranges accept nothing', () => {
    assert.deepEqual(both(undefined), [false, false]);
    assert.deepEqual(both(''), [false, false]);
    assert.deepEqual(both(' , ,;q=1'), [false, false]);
  });
});

describe('mediaTypeOf', () => {
  test('the media type, lower-cased, without parameters', () => {
    assert.equal(mediaTypeOf('application/json'), 'application/json');
    assert.equal(mediaTypeOf('text/event-stream'), 'text/event-stream');
    assert.equal(mediaTypeOf('Text/Event-Stream; charset=utf-8'), 'text/event-stream');
    assert.equal(mediaTypeOf(['application/json; charset=utf-8', 'text/plain']), 'application/json');
    assert.equal(mediaTypeOf(undefined), '');
  });
});
