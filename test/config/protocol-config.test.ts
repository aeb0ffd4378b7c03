/**
 * `backends[].protocol` (SPEC §8): `auto` by default, a revision pins the era, and only a
 * Streamable HTTP backend can be pinned to 2026-07-28 (the local bridge speaks only the
 * `initialize`-based revisions).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError } from '../../src/config/errors.js';
import { parseConfig } from '../../src/config/load.js';

function config(backend: Record<string, unknown>): Record<string, unknown> {
  return { publicUrl: 'https://mcp.example.com', auth: { issuer: 'https://idp.example.com', audience: 'https://mcp.example.com/mcp' }, backends: [{ name: 'hr', url: 'https://hr.example.com/mcp', ...backend }] };
}

function fails(input: Record<string, unknown>, key: string, problem: RegExp): void {
  assert.throws(
    () => parseConfig(input),
    (err: unknown) => err instanceof ConfigError && err.key === key && problem.test(err.message),
  );
}

test('protocol defaults to auto; either revision may be pinned', () => {
  assert.equal(parseConfig(config({})).backends[0]!.protocol, 'auto');
  assert.equal(parseConfig(config({ protocol: '2026-07-28' })).backends[0]!.protocol, '2026-07-28');
  assert.equal(parseConfig(config({ protocol: '2025-11-25' })).backends[0]!.protocol, '2025-11-25');
  assert.equal(parseConfig(config({ url: undefined, transport: 'stdio', command: 'server', protocol: '2025-11-25' })).backends[0]!.protocol, '2025-11-25');
});

test('an unknown protocol, or 2026-07-28 on a bridged transport, is an error naming the key', () => {
  fails(config({ protocol: '2025-06-18' }), 'backends[0].protocol', /auto.*2026-07-28.*2025-11-25/);
  fails(config({ protocol: 'latest' }), 'backends[0].protocol', /auto/);
  fails(config({ url: undefined, transport: 'stdio', command: 'server', protocol: '2026-07-28' }), 'backends[0].protocol', /needs transport streamable-http/);
  fails(config({ transport: 'sse', protocol: '2026-07-28' }), 'backends[0].protocol', /needs transport streamable-http/);
});
