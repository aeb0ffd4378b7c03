/** Token encryption at rest and cookie signing (SPEC §4): round trips, tampering, wrong key or context. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createSigner, createTokenCipher } from '../../src/state/secrets.js';

const KEY = 'k'.repeat(32);

test('sealed tokens open only with the same key and context, and never show the plaintext', () => {
  const cipher = createTokenCipher(KEY);
  const sealed = cipher.seal('gho_secret-access-token', 'vault:alice:github');
  assert.ok(!sealed.includes('gho_secret'), 'ciphertext does not contain the token');
  assert.notEqual(cipher.seal('gho_secret-access-token', 'vault:alice:github'), sealed, 'a fresh IV every time');
  assert.equal(cipher.open(sealed, 'vault:alice:github'), 'gho_secret-access-token');
  assert.equal(cipher.open(sealed, 'vault:bob:github'), undefined, 'bound to its owner');
  assert.equal(createTokenCipher('x'.repeat(32)).open(sealed, 'vault:alice:github'), undefined, 'another key');
  const [v, iv, tag, body] = sealed.split('.');
  const flipped = body!.slice(0, -2) + (body!.endsWith('AA') ? 'AB' : 'AA');
  assert.equal(cipher.open([v, iv, tag, flipped].join('.'), 'vault:alice:github'), undefined, 'tampered body');
  assert.equal(cipher.open('garbage', 'vault:alice:github'), undefined);
});

test('a sealed value whose GCM tag is truncated (4, 8, 12 or 15 bytes) does not open', () => {
  const cipher = createTokenCipher(KEY);
  const sealed = cipher.seal('gho_secret-access-token', 'vault:alice:github');
  const [v, iv, tag, body] = sealed.split('.');
  const full = Buffer.from(tag!, 'base64url');
  assert.equal(full.length, 16);
  for (const bytes of [4, 8, 12, 15]) {
    // Still a prefix of the right tag: without authTagLength, Node compares just these bytes.
    const truncated = [v, iv, full.subarray(0, bytes).toString('base64url'), body].join('.');
    assert.equal(cipher.open(truncated, 'vault:alice:github'), undefined, `${bytes}-byte tag`);
  }
  assert.equal(cipher.open([v, iv, full.toString('base64url'), body].join('.'), 'vault:alice:github'), 'gho_secret-access-token', 'the full tag still opens');
});

test('signed values verify only unchanged and with the same key', () => {
  const signer = createSigner(KEY);
  const signed = signer.sign('browser-session-id');
  assert.equal(signer.verify(signed), 'browser-session-id');
  assert.equal(signer.verify(signed.replace('browser', 'Browser')), undefined);
  assert.equal(signer.verify(`${signed}x`), undefined);
  assert.equal(createSigner('y'.repeat(32)).verify(signed), undefined);
  assert.equal(signer.verify('no-signature'), undefined);
});
