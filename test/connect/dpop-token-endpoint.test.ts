/**
 * DPoP at a token endpoint, strictly (RFC 9449 §5, §8; issue 42 cause 12): the provider client
 * against node:http token endpoints that misbehave in the ways a strict client must refuse —
 * a `use_dpop_nonce` without a readable nonce, a second one after the retry, a DPoP token to a
 * request that proved no key, a Bearer one where the backend requires bound tokens. The
 * well-behaved server (nonces, binding, refresh) is test/connect/dpop-link.e2e.test.ts's.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { decodeJwt } from 'jose';
import { exchangeCode, ProviderError, refreshTokens, type ProviderEndpoints } from '../../src/providers/provider-client.js';
import { dpopKey, generateDpopKey, type DpopKey } from '../../src/backends/dpop.js';
import { sendJson, startHttpFixture, type HttpFixture } from '../fixtures/provider-http-fixture.js';

/** What each path answers: `malformed` a challenge with a nonce outside the syntax, `again` a challenge every time, `dpop`/`bearer` a token of that type. */
const ANSWERS: Record<string, (proof: string | undefined) => { status: number; body: unknown; nonce?: string }> = {
  '/malformed': () => ({ status: 400, body: { error: 'use_dpop_nonce' }, nonce: 'two words' }),
  '/missing': () => ({ status: 400, body: { error: 'use_dpop_nonce' } }),
  '/again': () => ({ status: 400, body: { error: 'use_dpop_nonce' }, nonce: 'n-again' }),
  '/dpop': () => ({ status: 200, body: { access_token: 'at-dpop', token_type: 'DPoP', expires_in: 60 } }),
  '/bearer': () => ({ status: 200, body: { access_token: 'at-bearer', token_type: 'Bearer', expires_in: 60 } }),
  '/once': (proof) => (proof && decodeJwt(proof).nonce === 'n-1' ? { status: 200, body: { access_token: 'at-1', token_type: 'dpop', refresh_token: 'rt-1' } } : { status: 400, body: { error: 'use_dpop_nonce' }, nonce: 'n-1' }),
};

let server: HttpFixture;
let key: DpopKey;

before(async () => {
  key = await dpopKey(await generateDpopKey());
  server = await startHttpFixture((req, res) => {
    const answer = ANSWERS[req.path]?.(req.headers.dpop as string | undefined);
    if (answer) sendJson(res, answer.status, answer.body, answer.nonce ? { 'dpop-nonce': answer.nonce } : {});
  });
});

after(() => server?.close());

const at = (path: string, dpop?: ProviderEndpoints['dpop']): ProviderEndpoints => ({
  authorizationUrl: `${server.origin}/authorize`,
  tokenUrl: `${server.origin}${path}?tenant=x`,
  clientId: 'c',
  scopes: [],
  ...(dpop ? { dpop } : {}),
});
const code = { code: 'code-1', redirectUri: 'http://127.0.0.1:9/cb', codeVerifier: 'v'.repeat(43) };

async function refused(fn: () => Promise<unknown>): Promise<ProviderError> {
  const err = await fn().then(() => undefined, (e: unknown) => e);
  assert.ok(err instanceof ProviderError, `expected a ProviderError, got ${String(err)}`);
  return err;
}

test('a use_dpop_nonce is retried once with the nonce; the proof names the endpoint without its query', async () => {
  const from = server.requests.length;
  const tokens = await exchangeCode(at('/once'), code, { dpop: key });
  assert.equal(tokens.tokenType, 'DPoP', 'normalised');
  const proofs = server.requests.slice(from).map((r) => decodeJwt(r.headers.dpop as string));
  assert.equal(proofs.length, 2);
  assert.equal(proofs[0]!.htu, `${server.origin}/once`);
  assert.equal(proofs[0]!.htm, 'POST');
  assert.equal(proofs[1]!.nonce, 'n-1');
  assert.notEqual(proofs[0]!.jti, proofs[1]!.jti);
  // The origin's nonce is remembered: the refresh proves with it at once.
  const before_ = server.requests.length;
  await refreshTokens(at('/once'), 'rt-1', { dpop: key });
  assert.equal(server.requests.length - before_, 1);
});

test('a use_dpop_nonce without one readable nonce is refused, not retried', async () => {
  for (const path of ['/malformed', '/missing']) {
    const from = server.requests.length;
    const err = await refused(() => exchangeCode(at(path), code, { dpop: key }));
    assert.equal(err.kind, 'bad_response');
    assert.match(err.message, /DPoP-Nonce/);
    assert.equal(server.requests.length - from, 1, `${path}: no retry`);
  }
});

test('a second use_dpop_nonce after the retry is refused: two requests, no more', async () => {
  const from = server.requests.length;
  const err = await refused(() => refreshTokens(at('/again'), 'rt', { dpop: key }));
  assert.match(err.message, /again after the retry/);
  assert.equal(server.requests.length - from, 2);
});

test('a token type not asked for is refused: DPoP without a proof, Bearer where bound tokens are required', async () => {
  const unasked = await refused(() => exchangeCode(at('/dpop'), code));
  assert.match(unasked.message, /did not ask for/);
  assert.equal(server.requests.at(-1)!.headers.dpop, undefined, 'no proof was sent');
  const bearer = await refused(() => exchangeCode(at('/bearer', { boundTokensRequired: true }), code, { dpop: key }));
  assert.match(bearer.message, /requires DPoP-bound tokens/);
  // Not required: the server chose not to bind it, and the client may use it as a Bearer token (RFC 9449 §5).
  assert.equal((await exchangeCode(at('/bearer', { boundTokensRequired: false }), code, { dpop: key })).tokenType, 'Bearer');
});
