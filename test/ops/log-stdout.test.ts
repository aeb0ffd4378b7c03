/**
 * The gateway's stdout log destination (http/server-options.ts): lines are gathered into
 * ~4 KiB synchronous writes, so a line shorter than that waits in the buffer. It must still
 * leave: within the flush interval on a quiet gateway, and when the process exits — after a
 * crash too (SPEC §6: the lines leading up to a failure are the ones an operator needs).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const SERVER_OPTIONS = fileURLToPath(new URL('../../src/http/server-options.ts', import.meta.url));

/** A child that logs one line through serverOptions' logger at `info`, then does `then`. */
function child(then: string, killOnLine = false): Promise<{ stdout: string; code: number | null; signal: NodeJS.Signals | null }> {
  const code = `
    import { serverOptions } from ${JSON.stringify(SERVER_OPTIONS)};
    const opts = serverOptions({ log: { level: 'info' }, listen: {}, limits: { maxBodyBytes: 1024, bodyTimeout: 1000 } });
    opts.loggerInstance.info({ marker: 'buffered-line' }, 'hello');
    ${then}
  `;
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    p.stdout.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
      // SIGKILL: no exit handler runs, so what arrived was written while the process lived.
      if (killOnLine && stdout.includes('buffered-line')) p.kill('SIGKILL');
    });
    p.stderr.resume();
    const timer = setTimeout(() => p.kill('SIGTERM'), 20_000);
    p.on('error', reject);
    p.on('close', (exitCode, signal) => {
      clearTimeout(timer);
      resolve({ stdout, code: exitCode, signal });
    });
  });
}

const logged = (stdout: string) => stdout.split('\n').filter((l) => l.includes('"marker":"buffered-line"')).length;

test('a buffered line is written when the process exits', async () => {
  const r = await child('process.exit(0);');
  assert.equal(r.code, 0);
  assert.equal(logged(r.stdout), 1, r.stdout);
});

test('a buffered line is written when the process crashes', async () => {
  const r = await child("setImmediate(() => { throw new Error('boom'); });");
  assert.equal(r.code, 1);
  assert.equal(logged(r.stdout), 1, r.stdout);
});

test('a buffered line leaves while the process lives on (the periodic flush)', async () => {
  // The child would stay up 15 s; it is killed as soon as the line arrives (else after 20 s).
  const r = await child('setTimeout(() => {}, 15_000);', true);
  assert.equal(r.signal, 'SIGKILL');
  assert.equal(logged(r.stdout), 1, r.stdout);
});
