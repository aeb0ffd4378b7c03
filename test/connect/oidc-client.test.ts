/**
 * Browser sign-in's code exchange (src/browser/oidc-client.ts) goes through the providers'
 * one token request (provider-client.ts `tokenResponse`, issue 14): client authentication as
 * the issuer's metadata allows, no redirect followed, a bounded answer, and a log reason that
 * names the OAuth error code but carries nothing sent and no provider text. Against a real
 * stand-in issuer on 127.0.0.1 (Fastify); the id_token checks are covered in login.test.ts.
 */
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import { createOidcClient, SignInError } from '../../src/browser/oidc-client.js';
import { parseConfig } from '../../src/config/load.js';
import type { ConfigInput } from '../../src/config/schema.js';

interface TokenCall {
  authorization?: string;
  form: URLSearchParams;
}

let idp: FastifyInstance;
let issuer = '';
let authMethods: string[] | undefined;
let tokenReply: (reply: FastifyReply) => unknown;
let calls: TokenCall[] = [];
let redirectFollowed = false;

before(async () => {
  idp = Fastify();
  idp.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_r, body, done) => done(null, body));
  idp.get('/.well-known/openid-configuration', async () => ({
    issuer,
    authorization_endpoint: `${issuer}/authorize`,
    token_endpoint: `${issuer}/token`,
    jwks_uri: `${issuer}/jwks`,
    ...(authMethods ? { token_endpoint_auth_methods_supported: authMethods } : {}),
  }));
  idp.post('/token', async (request, reply) => {
    calls.push({ authorization: request.headers.authorization, form: new URLSearchParams(request.body as string) });
    return tokenReply(reply);
  });
  idp.post('/elsewhere', async () => {
    redirectFollowed = true;
    return { access_token: 'at', token_type: 'Bearer', id_token: 'x.y.z' };
  });
  await idp.listen({ port: 0, host: '127.0.0.1' });
  issuer = `http://127.0.0.1:${(idp.server.address() as { port: number }).port}`;
});

after(() => idp.close());

beforeEach(() => {
  calls = [];
  authMethods = undefined;
  redirectFollowed = false;
  // A token response without an id_token: the exchange happened, verification stops there.
  tokenReply = () => ({ access_token: 'at', token_type: 'Bearer' });
});

function client(login: NonNullable<ConfigInput['auth']['login']>) {
  const config = parseConfig({
    publicUrl: 'http://127.0.0.1:9',
    auth: { issuer, audience: 'http://127.0.0.1:9/mcp', login },
    backends: [{ name: 'demo', url: 'http://127.0.0.1:9/mcp' }],
  });
  return createOidcClient(config, config.auth.login!);
}

const REDEEM = { code: 'the-code-1234', verifier: 'the-verifier-5678', nonce: 'n', redirectUri: 'http://127.0.0.1:9/login/callback' };

/** The SignInError a redeem ends with. */
async function failure(login: NonNullable<ConfigInput['auth']['login']>): Promise<SignInError> {
  try {
    await client(login).redeem(REDEEM);
  } catch (err) {
    assert.ok(err instanceof SignInError, String(err));
    return err;
  }
  assert.fail('redeem succeeded');
}

describe('sign-in code exchange through the providers token request', () => {
  test('a confidential client sends client_secret_basic, id and secret form-urlencoded (RFC 6749 §2.3.1); the body has the code grant', async () => {
    const err = await failure({ clientId: 'web app', clientSecret: 's3cr3t +/&é' });
    assert.equal(err.stage, 'id_token');
    assert.equal(calls.length, 1);
    const [call] = calls;
    const basic = Buffer.from(call!.authorization!.replace(/^Basic /, ''), 'base64').toString('utf8');
    const [id, secret] = basic.split(':').map((part) => new URLSearchParams(`v=${part}`).get('v'));
    assert.deepEqual([id, secret], ['web app', 's3cr3t +/&é']);
    assert.equal(call!.form.get('grant_type'), 'authorization_code');
    assert.equal(call!.form.get('code'), REDEEM.code);
    assert.equal(call!.form.get('code_verifier'), REDEEM.verifier);
    assert.equal(call!.form.get('redirect_uri'), REDEEM.redirectUri);
    assert.equal(call!.form.get('client_secret'), null);
  });

  test('client_secret_post when the metadata lists it and not client_secret_basic; a public client names itself in the body', async () => {
    authMethods = ['client_secret_post', 'private_key_jwt'];
    await failure({ clientId: 'web', clientSecret: 'secret-1' });
    assert.equal(calls[0]!.authorization, undefined);
    assert.equal(calls[0]!.form.get('client_id'), 'web');
    assert.equal(calls[0]!.form.get('client_secret'), 'secret-1');

    authMethods = undefined;
    await failure({ clientId: 'public-web' });
    assert.equal(calls[1]!.authorization, undefined);
    assert.equal(calls[1]!.form.get('client_id'), 'public-web');
    assert.equal(calls[1]!.form.get('client_secret'), null);
  });

  test('a redirecting token endpoint is a failed exchange, and the redirect is not followed', async () => {
    tokenReply = (reply) => reply.code(307).header('location', `${issuer}/elsewhere`).send();
    const err = await failure({ clientId: 'web', clientSecret: 'secret-1' });
    assert.equal(err.stage, 'exchange');
    assert.match(err.message, /redirect/);
    assert.equal(redirectFollowed, false);
  });

  test('an answer over 256 KiB is a failed exchange', async () => {
    tokenReply = () => ({ access_token: 'at', token_type: 'Bearer', padding: 'x'.repeat(300 * 1024) });
    const err = await failure({ clientId: 'web' });
    assert.equal(err.stage, 'exchange');
    assert.match(err.message, /exceeds/);
  });

  test('an OAuth error is logged by status and code, without the description, the code or the secret', async () => {
    tokenReply = (reply) => reply.code(400).send({ error: 'invalid_grant', error_description: `code the-code-1234 with secret-1 is gone` });
    const err = await failure({ clientId: 'web', clientSecret: 'secret-1' });
    assert.equal(err.stage, 'exchange');
    assert.equal(err.message, 'token endpoint answered HTTP 400 (invalid_grant)');
  });
});
