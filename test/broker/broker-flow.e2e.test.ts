/**
 * Broker mode end to end (issue 19, SPEC §8): an MCP SDK client that knows only
 * `<gateway>/mcp/everything` gets in through the gateway's own authorization server while the
 * upstream identity provider (oauth2-mock-server: no registration endpoint; the gateway's
 * login client is configured) offers its clients nothing but sign-in.
 *
 * Two real replicas on one Redis with signing keys from config; the SDK's requests (discovery,
 * registration, token, refresh, MCP) alternate between them, the browser (real Chromium)
 * goes to `publicUrl`. The SDK's `redirectToAuthorization` hands the URL to the browser, which
 * signs in through `/login` at the IdP, sees the consent page and allows; a loopback server
 * catches the redirect with the code, as a desktop client's listener does. Once with RFC 7591
 * registration, once with a Client ID Metadata Document. The access tokens live 5 s, so
 * refresh is exercised for real; refresh-token replay ends the grant; revocation ends access.
 * A registered client that obtained a token outlives `unusedClientTtl` (20 s here), which
 * forgets one that did not, and still refreshes (issue 41 §8: `keepClient` on `grant.success`).
 *
 * All of it twice (issue 28 §2): with `auth.scopes: [mcp]`, where the SDK asks for `mcp`, and
 * with the default config (no `auth.scopes`), where the metadata advertises no scope and the
 * SDK's client sends no `scope` at all — valid OAuth, which must end in a token too.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Page } from 'playwright-core';
import { launchBrowser, watchPage, type BrowserHandle } from '../helpers/browser.js';
import { startEverything, type EverythingHandle } from '../helpers/everything.js';
import { startOAuthServer, type OAuthHandle } from '../helpers/oauth.js';
import { startTestRedis, type TestRedis } from '../helpers/redis-topology.js';
import { startReplicas, type ReplicaSet } from '../helpers/replicas.js';
import { ecPem, jwtHeader, jwtPayload, MemoryOAuthClient, startCallbackServer, startMetadataDocumentServer, type CallbackServer } from './support.js';

/**
 * Short, so that the refresh tests wait little for a token to expire; not shorter, because the
 * sign-in's token must still be good when the client first uses it: at 2 s, a clean-clone run
 * under load 17 saw the first connect after the sign-in end in the SDK's `Unauthorized`, which it
 * throws when a request is refused again after its auth step.
 */
const ACCESS_TOKEN_TTL_S = 5;
/** `registrationLimits.unusedClientTtl` at its least: a registration that obtains no token is forgotten after a minute. */
const UNUSED_CLIENT_TTL = '20s';

/** The two configurations: `auth.scopes` set, and left at its default (no scope anywhere). */
const VARIANTS = [
  { title: 'auth.scopes: [mcp]', scopes: ['mcp'] as string[] | undefined, tokenScope: 'mcp' as string | undefined },
  { title: 'the default config, a client that sends no scope', scopes: undefined, tokenScope: undefined },
];

for (const variant of VARIANTS) {
  describe(`broker flow with ${variant.title}`, () => {
    let redis: TestRedis;
    let oauth: OAuthHandle;
    let everything: EverythingHandle;
    let set: ReplicaSet;
    let browser: BrowserHandle;
    let callback: CallbackServer;

    before(async () => {
      [redis, oauth, everything, browser, callback] = await Promise.all([startTestRedis(), startOAuthServer(), startEverything(), launchBrowser(), startCallbackServer()]);
      set = await startReplicas({
        count: 2,
        redis: redis.config,
        issuer: oauth.issuer,
        // Only tenant acme may use it: the upstream sign-in's tenant claim must reach the gateway's own tokens.
        backends: [{ name: 'everything', url: everything.url, access: { tenants: ['acme'] } }],
        auth: {
          mode: 'broker',
          tenantClaim: 'org',
          ...(variant.scopes ? { scopes: variant.scopes } : {}),
          // The gateway's own tokens are checked to the second: a refresh must follow their expiry.
          clockTolerance: '0s',
          login: { clientId: 'switchboard', clientSecret: 'switchboard-secret', scopes: ['openid', 'profile'] },
          broker: { signingKeys: [ecPem(), ecPem()], accessTokenTtl: `${ACCESS_TOKEN_TTL_S}s`, refreshTokenTtl: '1h', registrationLimits: { unusedClientTtl: UNUSED_CLIENT_TTL } },
        },
        extra: { secrets: { cookieKey: 'k'.repeat(40), tokenKey: 't'.repeat(40) } },
      });
    });

    after(async () => {
      if (process.env.SB_DEBUG_REPLICAS) for (const r of set?.replicas ?? []) process.stderr.write(`--- replica ${r.index}\n${r.child.logs()}\n`);
      await set?.stop();
      await Promise.allSettled([browser?.close(), callback?.close(), everything?.stop(), oauth?.stop(), redis?.stop()]);
    });

    const publicUrl = () => set.replicas[0]!.url;
    const endpoint = () => new URL(`${publicUrl()}/mcp/everything`);
    const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

    /** Until the saved access token has expired (by its own `exp`), plus a second. */
    async function outlive(accessToken: string): Promise<void> {
      const exp = jwtPayload(accessToken).exp as number;
      await sleep(Math.max(0, exp * 1000 - Date.now()) + 1_000);
    }

    /**
     * The SDK flow as a desktop client runs it: connect → 401 → discovery, registration (or
     * the document's URL as client_id), authorization URL → the user's browser signs in and
     * allows → the code comes back → `finishAuth` → connect again.
     */
    async function authorize(provider: MemoryOAuthClient, page: Page): Promise<Client> {
      const fetch = set.roundRobinFetch();
      const first = new Client({ name: 'broker-test', version: '1.0.0' });
      await assert.rejects(first.connect(new StreamableHTTPClientTransport(endpoint(), { authProvider: provider, fetch })), UnauthorizedError);
      const authorization = await provider.nextAuthorization();
      assert.equal(authorization.origin, publicUrl(), 'the gateway is the authorization server');
      assert.equal(authorization.searchParams.get('scope'), variant.scopes?.join(' ') ?? null, 'the SDK asks for the advertised scopes, and for none when none are advertised');
      await page.goto(authorization.href);
      assert.match(await page.title(), /^Allow .* to use Switchboard\?/);
      const redirected = callback.next();
      await page.getByRole('button', { name: 'Allow' }).click();
      const query = await redirected;
      assert.equal(query.get('error'), null, `authorization failed: ${query.get('error_description')}`);
      assert.equal(query.get('iss'), publicUrl(), 'RFC 9207 iss in the response');
      const transport = new StreamableHTTPClientTransport(endpoint(), { authProvider: provider, fetch });
      await transport.finishAuth(query.get('code')!);
      const client = new Client({ name: 'broker-test', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(endpoint(), { authProvider: provider, fetch }));
      return client;
    }

    async function echo(client: Client, text: string): Promise<string> {
      const result = await client.callTool({ name: 'echo', arguments: { message: text } });
      return JSON.stringify(result.content);
    }

    async function tokenRequest(form: Record<string, string>, path = '/oauth2/token'): Promise<{ status: number; body: Record<string, unknown> }> {
      const res = await set.roundRobinFetch()(`${publicUrl()}${path}`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(form) });
      const text = await res.text();
      return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
    }

    async function signedInPage(sub: string): Promise<Page> {
      const context = await browser.newContext();
      await context.addCookies([oauth.subjectCookie(sub), oauth.claimsCookie({ org: 'acme', email: `${sub}@example.com` })]);
      return context.newPage();
    }

    describe('broker mode with RFC 7591 dynamic registration', () => {
      const metadata = { client_name: 'Registered Desktop Client', redirect_uris: [] as string[], grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none' };
      let provider: MemoryOAuthClient;
      let client: Client;

      test('the SDK client registers, the user signs in upstream and allows, and the call goes through', async () => {
        provider = new MemoryOAuthClient(callback.url, { ...metadata, redirect_uris: [callback.url] });
        const page = await signedInPage('alice');
        const problems = watchPage(page);
        client = await authorize(provider, page);
        assert.match(await echo(client, 'hello broker'), /hello broker/);
        assert.ok(provider.client?.client_id && !provider.client.client_id.startsWith('http'), 'registered dynamically');
        assert.deepEqual(problems.problems, [], 'the pages load without CSP or console errors');

        const token = provider.saved!.access_token;
        const claims = jwtPayload(token);
        assert.equal(claims.iss, publicUrl());
        assert.equal(claims.sub, 'alice', 'the upstream user');
        assert.equal(claims.aud, endpoint().href, 'RFC 8707: the resource the client asked for');
        assert.equal(claims.scope, variant.tokenScope, 'auth.scopes, or no scope at all by default');
        assert.equal(claims.org, 'acme', 'the tenant claim of the upstream sign-in, which the access policy reads');
        assert.equal(claims.email, undefined, 'nothing else of the profile');
        assert.equal(jwtHeader(token).typ, 'at+jwt');
        const jwks = (await (await fetch(`${publicUrl()}/oauth2/jwks`)).json()) as { keys: Array<{ kid: string }> };
        assert.equal(jwks.keys.length, 2, 'both configured keys are published');
        assert.equal(jwtHeader(token).kid, jwks.keys[0]!.kid, 'the first key signs');
        assert.ok(provider.saved!.refresh_token, 'a refresh token was issued');
      });

      test('after the access token expires, the SDK refreshes (rotating the refresh token) and goes on', async () => {
        const before = { ...provider.saved! };
        await outlive(before.access_token);
        assert.match(await echo(client, 'after expiry'), /after expiry/);
        assert.notEqual(provider.saved!.access_token, before.access_token, 'a new access token');
        assert.notEqual(provider.saved!.refresh_token, before.refresh_token, 'the refresh token rotated');
        assert.equal(provider.authorizations.length, 1, 'no new sign-in was needed');
      });

      test('a refresh that asks for a wider resource is refused and leaves the refresh token usable (issue 28 §6)', async () => {
        const clientId = provider.client!.client_id;
        const refreshToken = provider.saved!.refresh_token!;
        // The grant is for /mcp/everything; /mcp (and auth.audience) would open every backend.
        const wider = await tokenRequest({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: clientId, resource: set.audience });
        assert.equal(wider.status, 400);
        assert.equal(wider.body.error, 'invalid_target');
        const normal = await tokenRequest({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: clientId, resource: endpoint().href });
        assert.equal(normal.status, 200, `the same refresh token still works: ${JSON.stringify(normal.body)}`);
        assert.equal(jwtPayload(normal.body.access_token as string).aud, endpoint().href, 'for the resource that was granted');
        assert.notEqual(normal.body.refresh_token, refreshToken, 'and rotates as usual');
        provider.saveTokens(normal.body as unknown as Parameters<MemoryOAuthClient['saveTokens']>[0]);
      });

      test('a replayed refresh token is refused and ends the grant: the newest one stops working too', async () => {
        const clientId = provider.client!.client_id;
        const newest = provider.saved!.refresh_token!;
        // The one before the newest: refresh once more by hand, keeping the old one.
        const rotated = await tokenRequest({ grant_type: 'refresh_token', refresh_token: newest, client_id: clientId, resource: endpoint().href });
        assert.equal(rotated.status, 200);
        const replay = await tokenRequest({ grant_type: 'refresh_token', refresh_token: newest, client_id: clientId });
        assert.equal(replay.status, 400);
        assert.equal(replay.body.error, 'invalid_grant');
        const after = await tokenRequest({ grant_type: 'refresh_token', refresh_token: rotated.body.refresh_token as string, client_id: clientId });
        assert.equal(after.status, 400, 'the grant is over');
        assert.equal(after.body.error, 'invalid_grant');
        await client.close();
      });
    });

    /** Whether the gateway knows `clientId`: a bogus refresh token is `invalid_grant` for a known client, `invalid_client` for one it forgot. */
    async function clientKnown(clientId: string): Promise<boolean> {
      const res = await tokenRequest({ grant_type: 'refresh_token', refresh_token: 'not-a-refresh-token', client_id: clientId });
      assert.ok(res.body.error === 'invalid_grant' || res.body.error === 'invalid_client', JSON.stringify(res.body));
      return res.body.error === 'invalid_grant';
    }

    // keepClient does not depend on scopes, and the test waits out unusedClientTtl: the first variant only.
    if (variant === VARIANTS[0]) {
      test(`a registered client that obtained a token outlives unusedClientTtl (${UNUSED_CLIENT_TTL}), which forgets one that did not, and refreshes`, async () => {
        const provider = new MemoryOAuthClient(callback.url, { client_name: 'Kept Client', redirect_uris: [callback.url], grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none' });
        const client = await authorize(provider, await signedInPage('carol'));
        const usedId = provider.client!.client_id;
        // Registered after the used one, so once it is forgotten the used one's unused life is over too.
        const registered = await set.roundRobinFetch()(`${publicUrl()}/oauth2/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ client_name: 'Unused Client', redirect_uris: [callback.url], token_endpoint_auth_method: 'none' }) });
        assert.equal(registered.status, 201);
        const unusedId = ((await registered.json()) as { client_id: string }).client_id;
        assert.equal(await clientKnown(unusedId), true);
        // Until the store forgets the unused registration (its TTL), looked at once a second.
        const deadline = Date.now() + 90_000;
        while (await clientKnown(unusedId)) {
          assert.ok(Date.now() < deadline, 'the unused registration outlived unusedClientTtl by 30 s');
          await sleep(1_000);
        }
        assert.equal(await clientKnown(usedId), true, 'the client that obtained a token is still known');
        const before = provider.saved!;
        assert.match(await echo(client, 'past unusedClientTtl'), /past unusedClientTtl/);
        assert.notEqual(provider.saved!.access_token, before.access_token, 'the expired access token was refreshed');
        assert.equal(provider.authorizations.length, 1, 'no new sign-in was needed');
        await client.close();
      });
    }

    describe('broker mode with a Client ID Metadata Document', () => {
      let doc: Awaited<ReturnType<typeof startMetadataDocumentServer>>;
      let provider: MemoryOAuthClient;
      let client: Client;

      before(async () => {
        doc = await startMetadataDocumentServer((clientId) => ({
          client_id: clientId,
          client_name: 'Document Client',
          redirect_uris: [callback.url],
          grant_types: ['authorization_code', 'refresh_token'],
          response_types: ['code'],
          token_endpoint_auth_method: 'none',
        }));
      });
      after(() => doc?.close());

      test('the gateway advertises documents, fetches the client\'s once for both replicas, and the call goes through', async () => {
        const metadata = (await (await fetch(`${publicUrl()}/.well-known/oauth-authorization-server`)).json()) as Record<string, unknown>;
        assert.equal(metadata.client_id_metadata_document_supported, true);
        // The SDK takes this path for an https `clientMetadataUrl` only and then stores exactly
        // `{ client_id: <the URL> }` (client/auth.js); the test's document is plain http on
        // loopback (allowed while publicUrl is loopback), so the client starts from that state.
        provider = new MemoryOAuthClient(callback.url, { client_name: 'Document Client', redirect_uris: [callback.url] }, { client_id: doc.clientId });
        client = await authorize(provider, await signedInPage('bob'));
        assert.match(await echo(client, 'hello document'), /hello document/);
        assert.equal(jwtPayload(provider.saved!.access_token).sub, 'bob');
        assert.equal(jwtPayload(provider.saved!.access_token).client_id, doc.clientId);
        assert.equal(doc.fetches(), 1, 'fetched once, then read from the shared store by every replica');
      });

      test('revoking the refresh token (RFC 7009) ends the grant; its access token dies with its TTL', async () => {
        const { refresh_token: refreshToken, access_token: accessToken } = provider.saved!;
        const revoked = await tokenRequest({ token: refreshToken!, token_type_hint: 'refresh_token', client_id: doc.clientId }, '/oauth2/revoke');
        assert.equal(revoked.status, 200);
        const refresh = await tokenRequest({ grant_type: 'refresh_token', refresh_token: refreshToken!, client_id: doc.clientId });
        assert.equal(refresh.body.error, 'invalid_grant');
        await outlive(accessToken);
        // 401 → the SDK's refresh is refused → it asks for a new sign-in instead of getting in.
        await assert.rejects(echo(client, 'after revocation'), (err: Error) => err instanceof UnauthorizedError || /Unauthorized|401/.test(err.message));
        assert.equal(provider.authorizations.length, 2, 'the client was sent back to authorization');
        await client.close().catch(() => undefined);
      });
    });
  });
}
