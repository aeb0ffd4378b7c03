/**
 * The exchange request itself (src/exchange/exchange-grant.ts, exchange-endpoint.ts) against
 * a real authorization server process that speaks RFC 8693 and Entra's on-behalf-of grant
 * and verifies the user's token against a real identity provider's keys: both grants, client
 * authentication as the endpoint's metadata says, and failures sorted by what would help.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { decodeJwt } from 'jose';
import { ExchangeEndpoints } from '../../src/exchange/exchange-endpoint.js';
import { ExchangeFailedError, exchangeToken, type TokenExchangeConfig } from '../../src/exchange/exchange-grant.js';
import { startExchangeServer, type ExchangeServer } from '../helpers/exchange.js';
import { freePort } from '../helpers/free-port.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';

let idp: OAuthHandle;
let server: ExchangeServer;
let postOnly: ExchangeServer;

before(async () => {
  idp = await startOAuthServer();
  [server, postOnly] = await Promise.all([startExchangeServer({ idpIssuer: idp.issuer }), startExchangeServer({ idpIssuer: idp.issuer, authMethods: ['client_secret_post'] })]);
});

after(async () => {
  await Promise.allSettled([server?.stop(), postOnly?.stop(), idp?.stop()]);
});

const rfc8693 = (s: ExchangeServer, more: Partial<TokenExchangeConfig> = {}): TokenExchangeConfig => ({ clientId: s.clientId, clientSecret: s.clientSecret, audience: 'hr-api', scopes: ['hr.read'], ...more });

async function failureOf(promise: Promise<unknown>): Promise<ExchangeFailedError> {
  const err = await promise.then(
    () => assert.fail('the exchange should have failed'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof ExchangeFailedError, String(err));
  return err;
}

describe('RFC 8693 token exchange', () => {
  test('the user\'s token becomes one for the backend: its audience, the same user', async () => {
    const userToken = await idp.token({ sub: 'alice', aud: 'gateway' });
    const token = await exchangeToken({ tokenUrl: server.tokenUrl, clientAuthentication: 'client_secret_basic' }, rfc8693(server), userToken, 5_000);
    assert.notEqual(token.accessToken, userToken);
    const claims = decodeJwt(token.accessToken);
    assert.equal(claims.sub, 'alice');
    assert.equal(claims.aud, 'hr-api');
    assert.equal(claims.scope, 'hr.read');
    assert.ok(token.expiresAt! > Date.now() + 200_000, 'expires_in read');
    const seen = (await server.exchanges()).at(-1)!;
    assert.deepEqual({ grant: seen.grant, clientAuth: seen.clientAuth }, { grant: 'urn:ietf:params:oauth:grant-type:token-exchange', clientAuth: 'client_secret_basic' });
  });

  test('resource names the backend when there is no audience', async () => {
    const userToken = await idp.token({ sub: 'alice' });
    const token = await exchangeToken({ tokenUrl: server.tokenUrl, clientAuthentication: 'client_secret_post' }, rfc8693(server, { audience: undefined, resource: 'https://hr.example.com/mcp' }), userToken, 5_000);
    assert.equal(decodeJwt(token.accessToken).aud, 'https://hr.example.com/mcp');
    assert.equal((await server.exchanges()).at(-1)!.clientAuth, 'client_secret_post');
  });

  test('invalid_grant: signing in again could help; the user\'s token is not in the message', async () => {
    const userToken = await idp.token({ sub: 'mallory', claims: { exchange: 'deny' } });
    const err = await failureOf(exchangeToken({ tokenUrl: server.tokenUrl, clientAuthentication: 'client_secret_basic' }, rfc8693(server), userToken, 5_000));
    assert.deepEqual(err.failure, { outcome: 'invalid_grant', signInAgain: true, oauthError: 'invalid_grant' });
    assert.ok(!err.message.includes(userToken));
  });

  test('a wrong client secret is refused: the configuration, not the user', async () => {
    const userToken = await idp.token({ sub: 'alice' });
    const err = await failureOf(exchangeToken({ tokenUrl: server.tokenUrl, clientAuthentication: 'client_secret_basic' }, rfc8693(server, { clientSecret: 'wrong' }), userToken, 5_000));
    assert.deepEqual(err.failure, { outcome: 'refused', signInAgain: false, oauthError: 'invalid_client' });
    assert.ok(!err.message.includes('wrong'));
  });

  test('an endpoint that is down, or does not answer in time: retry later', async () => {
    const userToken = await idp.token({ sub: 'alice' });
    const down = await failureOf(exchangeToken({ tokenUrl: `http://127.0.0.1:${await freePort()}/token`, clientAuthentication: 'client_secret_basic' }, rfc8693(server), userToken, 5_000));
    assert.deepEqual(down.failure, { outcome: 'unavailable', signInAgain: false });
    await server.setMode('hang');
    try {
      const slow = await failureOf(exchangeToken({ tokenUrl: server.tokenUrl, clientAuthentication: 'client_secret_basic' }, rfc8693(server), userToken, 300));
      assert.deepEqual(slow.failure, { outcome: 'timeout', signInAgain: false });
    } finally {
      await server.setMode('normal');
    }
  });
});

describe('Entra on-behalf-of (preset entra-obo)', () => {
  test('jwt-bearer with requested_token_use=on_behalf_of and the API in scope', async () => {
    const userToken = await idp.token({ sub: 'bob' });
    const obo: TokenExchangeConfig = { clientId: server.clientId, clientSecret: server.clientSecret, scopes: ['api://graph-api/.default'], preset: 'entra-obo' };
    const token = await exchangeToken({ tokenUrl: server.tokenUrl, clientAuthentication: 'client_secret_post' }, obo, userToken, 5_000);
    const claims = decodeJwt(token.accessToken);
    assert.deepEqual([claims.sub, claims.aud], ['bob', 'api://graph-api']);
    const seen = (await server.exchanges()).at(-1)!;
    assert.deepEqual(
      { grant: seen.grant, requestedTokenUse: seen.requestedTokenUse, clientAuth: seen.clientAuth },
      { grant: 'urn:ietf:params:oauth:grant-type:jwt-bearer', requestedTokenUse: 'on_behalf_of', clientAuth: 'client_secret_post' },
    );
  });
});

describe('the endpoint and its client authentication', () => {
  test('without tokenUrl, the issuer\'s metadata names the endpoint and the method it takes', async () => {
    const endpoints = new ExchangeEndpoints(postOnly.issuer);
    const endpoint = await endpoints.of(rfc8693(postOnly));
    assert.deepEqual(endpoint, { tokenUrl: postOnly.tokenUrl, clientAuthentication: 'client_secret_post' });
    const userToken = await idp.token({ sub: 'carol' });
    assert.equal(decodeJwt((await exchangeToken(endpoint, rfc8693(postOnly), userToken, 5_000)).accessToken).sub, 'carol');
    // The server means it: Basic, which its metadata does not offer, is refused.
    const basic = await failureOf(exchangeToken({ ...endpoint, clientAuthentication: 'client_secret_basic' }, rfc8693(postOnly), userToken, 5_000));
    assert.equal(basic.failure.oauthError, 'invalid_client');
  });

  test('a configured tokenUrl the metadata does not describe: Basic, or the body for entra-obo', async () => {
    const endpoints = new ExchangeEndpoints(postOnly.issuer);
    assert.deepEqual(await endpoints.of(rfc8693(server, { tokenUrl: server.tokenUrl })), { tokenUrl: server.tokenUrl, clientAuthentication: 'client_secret_basic' });
    assert.deepEqual(await endpoints.of({ clientId: 'x', clientSecret: 'y', scopes: ['api://a/.default'], preset: 'entra-obo', tokenUrl: server.tokenUrl }), {
      tokenUrl: server.tokenUrl,
      clientAuthentication: 'client_secret_post',
    });
    // The issuer's own endpoint, configured explicitly: its metadata still decides.
    assert.equal((await endpoints.of(rfc8693(postOnly, { tokenUrl: postOnly.tokenUrl }))).clientAuthentication, 'client_secret_post');
  });

  test('an issuer whose metadata cannot be fetched: backends without tokenUrl get the failure, others go on', async () => {
    const endpoints = new ExchangeEndpoints(`http://127.0.0.1:${await freePort()}`);
    await assert.rejects(endpoints.of(rfc8693(server)), /could not be discovered from auth.issuer's metadata/);
    assert.deepEqual(await endpoints.of(rfc8693(server, { tokenUrl: server.tokenUrl })), { tokenUrl: server.tokenUrl, clientAuthentication: 'client_secret_basic' });
  });
});
