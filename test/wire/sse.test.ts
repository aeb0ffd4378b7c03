/**
 * The one SSE formatter and the one parser entry (src/wire/sse.ts) against the reading rules
 * of WHATWG HTML §9.2.6 "Interpreting an event stream": what the gateway writes must read back
 * as the same data and id whatever line breaks the data holds, the priming event and `retry`
 * must have the bytes MCP 2025-11-25 "Resumability and Redelivery" describes, and a reader fed
 * byte by byte must not break a multi-byte character.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createSseReader, eventDataOf, formatSseEvent, formatSseRetry, soleEventData, SSE_KEEP_ALIVE } from '../../src/wire/sse.js';
import { headerValue, mediaTypeOf } from '../../src/wire/headers.js';

interface Read {
  events: Array<{ data: string; id: string | undefined }>;
  retries: number[];
}

function read(chunks: Array<Buffer | string>): Read {
  const out: Read = { events: [], retries: [] };
  const reader = createSseReader({ onEvent: (data, id) => out.events.push({ data, id }), onRetry: (ms) => out.retries.push(ms) });
  for (const chunk of chunks) reader.feed(chunk);
  return out;
}

describe('SSE on the wire', () => {
  test('single-line data is one data line, with the id first', () => {
    assert.equal(formatSseEvent('{"jsonrpc":"2.0"}', 's-1'), 'id: s-1\ndata: {"jsonrpc":"2.0"}\n\n');
    assert.equal(formatSseEvent('x'), 'data: x\n\n');
  });

  test('multi-line data is one data line per line, split at LF, CRLF and a lone CR, and reads back with LF', () => {
    const wire = formatSseEvent('a\nb\r\nc\rd', '7');
    assert.equal(wire, 'id: 7\ndata: a\ndata: b\ndata: c\ndata: d\n\n');
    assert.deepEqual(read([wire]).events, [{ data: 'a\nb\nc\nd', id: '7' }]);
  });

  test('a priming event carries the id, the retry and empty data; retry alone and the keep-alive are not messages', () => {
    const priming = formatSseEvent('', 's-0', 1000);
    assert.equal(priming, 'id: s-0\nretry: 1000\ndata: \n\n');
    assert.equal(formatSseRetry(500), 'retry: 500\n\n');
    const result = read([priming, SSE_KEEP_ALIVE, formatSseEvent('m', 's-1'), formatSseRetry(500)]);
    assert.deepEqual(result.events, [
      { data: '', id: 's-0' },
      { data: 'm', id: 's-1' },
    ]);
    assert.deepEqual(result.retries, [1000, 500]);
  });

  test('the reader keeps a multi-byte character whole when it is split across chunks', () => {
    const bytes = Buffer.from(formatSseEvent('{"text":"€ and 😀"}', '1'));
    const oneByOne = [...bytes].map((b) => Buffer.from([b]));
    assert.deepEqual(read(oneByOne).events, [{ data: '{"text":"€ and 😀"}', id: '1' }]);
  });

  test('with maxEventChars, an event past the bound is reported once and the reader takes nothing after it', () => {
    const events: string[] = [];
    let tooLarge = 0;
    const reader = createSseReader({ onEvent: (data) => void events.push(data), onTooLarge: () => void tooLarge++, maxEventChars: 64 });
    reader.feed(formatSseEvent('small'));
    reader.feed('data: ' + 'x'.repeat(40));
    assert.equal(tooLarge, 0);
    reader.feed('x'.repeat(40));
    assert.equal(tooLarge, 1);
    reader.feed('\n\n' + formatSseEvent('after'));
    assert.deepEqual(events, ['small']);
    assert.equal(tooLarge, 1);
  });
});

describe('header values', () => {
  test('the first value of a repeated header, and the media type of a Content-Type', () => {
    assert.equal(headerValue(['a', 'b']), 'a');
    assert.equal(headerValue('a'), 'a');
    assert.equal(headerValue(undefined), undefined);
    assert.equal(mediaTypeOf('Text/Event-Stream; charset=utf-8'), 'text/event-stream');
    assert.equal(mediaTypeOf(['application/json', 'text/plain']), 'application/json');
    assert.equal(mediaTypeOf(undefined), '');
  });
});

describe('soleEventData', () => {
  /** What the general parser finds: the one event with data, or undefined. */
  function parsed(body: string): string | undefined {
    const events: string[] = [];
    createSseReader({ onEvent: (data) => void (data !== '' && events.push(data)) }).feed(body);
    return events.length === 1 ? events[0] : undefined;
  }

  test('the body SDK servers write is read as the parser reads it, and so is every other body (issue 29)', () => {
    const bodies = [
      'event: message\ndata: {"jsonrpc":"2.0","id":1,"result":{}}\n\n',
      'data: {"id":1}\n\n',
      'data:{"id":1}\n\n',
      'id: 7\nevent: message\ndata: {"id":1}\n\n',
      ': keep-alive\ndata: {"id":1}\n\n',
      'data:  two spaces\n\n',
      'data: \u00e9t\u00e9 \ud83d\ude00\n\n',
      // Not the plain shape: left to the parser, with its verdict.
      'id: 1\ndata: \n\n',
      'id: 1\ndata:\n\nevent: message\ndata: {"id":1}\n\n',
      'data: a\ndata: b\n\n',
      'data: one\n\ndata: two\n\n',
      'event: message\r\ndata: {"id":1}\r\n\r\n',
      '\ufeffdata: {"id":1}\n\n',
      'data\n\n',
      'data: {"id":1}\n',
      'data: {"id":1}',
      '',
      '\n\n',
    ];
    for (const body of bodies) assert.equal(soleEventData(Buffer.from(body)), parsed(body), JSON.stringify(body));
  });

  test('eventDataOf: every event with data, in order, as the parser reads them (progress, then the result)', () => {
    const all = (body: string): string[] => {
      const events: string[] = [];
      createSseReader({ onEvent: (data) => void (data !== '' && events.push(data)) }).feed(body);
      return events;
    };
    const bodies = [
      'id: p\ndata:\n\nevent: message\ndata: {"method":"notifications/progress"}\n\nevent: message\ndata: {"id":1,"result":{}}\n\n',
      'data: {"id":1}\n\n',
      'id: 1\ndata: \n\n',
      'data: a\r\ndata: b\r\n\r\ndata: c\n\n',
      'data: one\n\ndata: unfinished',
    ];
    for (const body of bodies) assert.deepEqual(eventDataOf(Buffer.from(body)), all(body), JSON.stringify(body));
  });
});
