/**
 * The buffered log destination (src/ops/log-buffer.ts, issue 29): lines leave in order, in one
 * write once about `minChars` have gathered or when flushed, encoded as UTF-8 whole; a write
 * that fails drops its batch without throwing at the logger (logging never takes the gateway
 * down), while an explicit flush reports it. Exit, crash and the periodic flush of the process's
 * stdout are in log-stdout.test.ts.
 */
import assert from 'node:assert/strict';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { LineBuffer } from '../../src/ops/log-buffer.js';

const dir = mkdtempSync(join(tmpdir(), 'log-buffer-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function fileBuffer(name: string, minChars: number) {
  const path = join(dir, name);
  const fd = openSync(path, 'w');
  return { buffer: new LineBuffer(fd, minChars), read: () => readFileSync(path, 'utf8'), close: () => closeSync(fd) };
}

describe('LineBuffer', () => {
  test('lines wait until about minChars have gathered, then leave together, in order', () => {
    const { buffer, read, close } = fileBuffer('batch.log', 30);
    buffer.write('{"n":1}\n');
    buffer.write('{"n":2}\n');
    assert.equal(read(), '', 'under the bound: nothing written yet');
    buffer.write('{"n":3,"pad":"xxxxxxxx"}\n');
    assert.equal(read(), '{"n":1}\n{"n":2}\n{"n":3,"pad":"xxxxxxxx"}\n');
    buffer.write('{"n":4}\n');
    buffer.flushSync();
    assert.equal(read(), '{"n":1}\n{"n":2}\n{"n":3,"pad":"xxxxxxxx"}\n{"n":4}\n');
    buffer.flushSync();
    assert.equal(read().split('\n').length, 5, 'a flush with nothing kept writes nothing');
    close();
  });

  test('characters outside ASCII are written as UTF-8, whole', () => {
    const { buffer, read, close } = fileBuffer('utf8.log', 4096);
    const line = '{"msg":"\u00e9t\u00e9 \u2603 \ud83d\ude00"}\n';
    buffer.write(line);
    buffer.flush();
    assert.equal(read(), line);
    close();
  });

  test('a write that fails drops its batch without throwing at the logger; a flush reports it', () => {
    const { buffer, close } = fileBuffer('closed.log', 10);
    close();
    assert.doesNotThrow(() => buffer.write('{"lost":"past the bound"}\n'));
    buffer.write('{"n":1}');
    assert.throws(() => buffer.flushSync(), /EBADF/);
    let reported: Error | undefined;
    buffer.write('{"n":2}');
    buffer.flush((err) => (reported = err));
    assert.match(String(reported), /EBADF/);
  });
});
