/**
 * Proves the integration-test helpers start REAL, usable parts and clean up.
 * Each test closes what it starts in `t.after`, so a failing assertion never
 * leaves a process behind.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { createRemoteJWKSet, decodeProtectedHeader, errors as joseErrors, jwtVerify } from 'jose';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CHROMIUM_LAUNCHER } from './browser.js';
import { spawnChild } from './child.js';
import { startEverything } from './everything.js';
import { freePort } from './free-port.js';
import { startOAuthServer, unsignedToken } from './oauth.js';
import { startRedis } from './redis.js';

/** True if the OS lets us listen on 127.0.0.1:port right now. */
function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen({ port, host: '127.0.0.1', exclusive: true }, () => server.close(() => resolve(true)));
  });
}

/** Resolves with the error code of a TCP connect to 127.0.0.1:port, or 'connected'. */
function tcpConnect(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1' });
    socket.setTimeout(2_000, () => {
      socket.destroy();
      resolve('timeout');
    });
    socket.once('connect', () => {
      socket.destroy();
      resolve('connected');
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
}

/** A client for one assertion; never retries, so a dead server fails fast. */
function redisClient(url: string): Redis {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 2_000 });
  client.on('error', () => undefined);
  return client;
}

describe('freePort', () => {
  test('returns a loopback port that can be bound', async () => {
    const port = await freePort();
    assert.ok(Number.isInteger(port) && port > 0 && port < 65536);
    assert.equal(await portIsFree(port), true);
  });
});

describe('spawnChild', () => {
  test('becomes ready on a matching line and stop() ends the process', async (t) => {
    const child = await spawnChild({
      name: 'echo child',
      command: process.execPath,
      args: ['-e', 'console.log("booting"); console.error("READY now"); setInterval(() => {}, 1000);'],
      ready: (line, stream) => stream === 'stderr' && line.startsWith('READY'),
      readyTimeoutMs: 10_000,
    });
    t.after(() => child.stop());
    assert.equal(child.readyLine, 'READY now');
    assert.match(child.logs(), /booting/);
    await child.stop();
    assert.ok(child.exit, 'child has exited');
    assert.equal(child.exit.signal, 'SIGTERM');
  });

  test('SIGKILLs a child that ignores SIGTERM', async (t) => {
    const child = await spawnChild({
      name: 'stubborn child',
      command: process.execPath,
      args: ['-e', 'process.on("SIGTERM", () => {}); console.log("up"); setInterval(() => {}, 1000);'],
      ready: (line) => line === 'up',
      stopGraceMs: 300,
    });
    t.after(() => child.stop());
    await child.stop();
    assert.equal(child.exit?.signal, 'SIGKILL');
  });

  test('rejects with the child output when it exits before ready', async () => {
    await assert.rejects(
      spawnChild({
        name: 'crashing child',
        command: process.execPath,
        args: ['-e', 'console.error("boom: config missing"); process.exit(3);'],
        ready: () => false,
      }),
      (err: Error) => /exited before it was ready \(code 3/.test(err.message) && /boom: config missing/.test(err.message),
    );
  });

  test('rejects and kills the child when the deadline passes', async () => {
    await assert.rejects(
      spawnChild({
        name: 'silent child',
        command: process.execPath,
        args: ['-e', 'setInterval(() => {}, 1000);'],
        ready: () => false,
        readyTimeoutMs: 300,
      }),
      /silent child was not ready within 300 ms/,
    );
  });
});

describe('startRedis', () => {
  test('answers PING and SET/GET, and again after restart()', async (t) => {
    const redis = await startRedis();
    t.after(() => redis.stop());
    assert.match(redis.url, /^redis:\/\/127\.0\.0\.1:\d+$/);
    assert.equal(redis.url, `redis://127.0.0.1:${redis.port}`);

    const client = redisClient(redis.url);
    t.after(() => client.disconnect());
    await client.connect();
    assert.equal(await client.ping(), 'PONG');
    assert.equal(await client.set('helpers:key', 'value'), 'OK');
    assert.equal(await client.get('helpers:key'), 'value');
    client.disconnect();

    await redis.restart();
    const after = redisClient(redis.url);
    t.after(() => after.disconnect());
    await after.connect();
    assert.equal(await after.ping(), 'PONG');
    assert.equal(await after.get('helpers:key'), null, 'data is not persisted across restart');
    assert.equal(await after.set('helpers:key', 'again'), 'OK');
    assert.equal(await after.get('helpers:key'), 'again');
  });

  test('pause() takes Redis away and resume() brings it back on the same port', async (t) => {
    const redis = await startRedis();
    t.after(() => redis.stop());

    await redis.pause();
    assert.equal(await tcpConnect(redis.port), 'ECONNREFUSED', 'nothing listens while paused');

    await redis.resume();
    const up = redisClient(redis.url);
    t.after(() => up.disconnect());
    await up.connect();
    assert.equal(await up.ping(), 'PONG');

    await redis.stop();
    assert.equal(await portIsFree(redis.port), true, 'port released after stop()');
    await assert.rejects(redis.resume(), /cannot be resumed/);
  });
});

describe('startOAuthServer', () => {
  test('serves discovery + JWKS and issues tokens that jose verifies with the requested claims', async (t) => {
    const oauth = await startOAuthServer({ own: true });
    t.after(() => oauth.stop());
    assert.match(oauth.issuer, /^http:\/\/127\.0\.0\.1:\d+$/);

    const discovery = (await (await fetch(`${oauth.issuer}/.well-known/openid-configuration`)).json()) as Record<string, unknown>;
    assert.equal(discovery.issuer, oauth.issuer);
    assert.equal(discovery.jwks_uri, oauth.jwksUri);
    assert.equal(typeof discovery.authorization_endpoint, 'string');

    const jwks = (await (await fetch(oauth.jwksUri)).json()) as { keys: { alg: string; kid: string; d?: unknown }[] };
    assert.deepEqual(jwks.keys.map((k) => k.alg).sort(), ['ES256', 'RS256']);
    assert.ok(jwks.keys.every((k) => k.d === undefined), 'JWKS exposes public keys only');

    const JWKS = createRemoteJWKSet(new URL(discovery.jwks_uri as string));
    const token = await oauth.token({
      sub: 'user-123',
      aud: 'switchboard',
      scope: 'mcp:read mcp:write',
      claims: { tenant: 'acme', groups: ['admins', 'devs'] },
    });
    const { payload, protectedHeader } = await jwtVerify(token, JWKS, { issuer: oauth.issuer, audience: 'switchboard' });
    assert.equal(protectedHeader.alg, 'RS256');
    assert.equal(payload.sub, 'user-123');
    assert.equal(payload.aud, 'switchboard');
    assert.equal(payload.scope, 'mcp:read mcp:write');
    assert.equal(payload.tenant, 'acme');
    assert.deepEqual(payload.groups, ['admins', 'devs']);
    assert.ok(typeof payload.exp === 'number' && payload.exp > Date.now() / 1000 + 3000, 'default lifetime about an hour');

    const es = await oauth.token({ sub: 'user-es', aud: ['a', 'switchboard'], alg: 'ES256' });
    assert.equal(decodeProtectedHeader(es).alg, 'ES256');
    const esVerified = await jwtVerify(es, JWKS, { issuer: oauth.issuer, audience: 'switchboard' });
    assert.deepEqual(esVerified.payload.aud, ['a', 'switchboard']);

    // Back to the default key even after an ES256 token (no round-robin leak).
    assert.equal(decodeProtectedHeader(await oauth.token({})).alg, 'RS256');
  });

  test('expiresIn -60 yields a token jose rejects as expired; bad aud and alg none are rejected', async (t) => {
    const oauth = await startOAuthServer({ own: true });
    t.after(() => oauth.stop());
    const JWKS = createRemoteJWKSet(new URL(oauth.jwksUri));

    const expired = await oauth.token({ sub: 'late', aud: 'switchboard', expiresIn: -60 });
    await assert.rejects(jwtVerify(expired, JWKS, { issuer: oauth.issuer, audience: 'switchboard' }), joseErrors.JWTExpired);

    const wrongAud = await oauth.token({ sub: 'x', aud: 'someone-else' });
    await assert.rejects(
      jwtVerify(wrongAud, JWKS, { issuer: oauth.issuer, audience: 'switchboard' }),
      joseErrors.JWTClaimValidationFailed,
    );

    const none = unsignedToken({ iss: oauth.issuer, sub: 'forger', aud: 'switchboard', exp: Math.floor(Date.now() / 1000) + 600 });
    assert.equal(none.split('.').length, 3);
    assert.ok(none.endsWith('.'));
    assert.deepEqual(decodeProtectedHeader(none), { alg: 'none', typ: 'JWT' });
    await assert.rejects(jwtVerify(none, JWKS, { issuer: oauth.issuer, audience: 'switchboard' }));
  });

  test('keeps the authorization-code flow working and rejects malformed overrides', async (t) => {
    const oauth = await startOAuthServer({ own: true });
    t.after(() => oauth.stop());

    const authorize = new URL(`${oauth.issuer}/authorize`);
    authorize.search = new URLSearchParams({
      response_type: 'code',
      client_id: 'browser',
      redirect_uri: 'http://127.0.0.1:1/callback',
      scope: 'openid',
      state: 's1',
    }).toString();
    const redirect = await fetch(authorize, { redirect: 'manual' });
    assert.equal(redirect.status, 302);
    const location = new URL(redirect.headers.get('location')!);
    assert.equal(location.searchParams.get('state'), 's1');
    const code = location.searchParams.get('code');
    assert.ok(code);

    const res = await fetch(`${oauth.issuer}/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'authorization_code', code, client_id: 'browser', redirect_uri: 'http://127.0.0.1:1/callback' }),
    });
    assert.equal(res.status, 200);
    const tokens = (await res.json()) as { access_token: string; id_token: string };
    const JWKS = createRemoteJWKSet(new URL(oauth.jwksUri));
    const id = await jwtVerify(tokens.id_token, JWKS, { issuer: oauth.issuer, audience: 'browser' });
    assert.equal(id.protectedHeader.alg, 'RS256', 'id_token uses the advertised alg');
    await jwtVerify(tokens.access_token, JWKS, { issuer: oauth.issuer });

    const bad = await fetch(`${oauth.issuer}/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ grant_type: 'client_credentials', claims: '{not json' }),
    });
    assert.equal(bad.status, 400);
    assert.match(await bad.text(), /claims/);
  });
});

describe('startEverything', () => {
  test('answers initialize through the official SDK client and lists tools', async (t) => {
    const everything = await startEverything();
    t.after(() => everything.stop());
    assert.match(everything.url, /^http:\/\/127\.0\.0\.1:\d+\/mcp$/);

    const client = new Client({ name: 'helpers-test', version: '0.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(everything.url));
    t.after(() => client.close());
    await client.connect(transport);
    assert.match(client.getServerVersion()?.name ?? '', /everything/);
    const { tools } = await client.listTools();
    assert.ok(tools.length > 0, 'server-everything exposes tools');
    assert.ok(tools.some((tool) => tool.name === 'echo'), `has an echo tool (got ${tools.map((x) => x.name).join(', ')})`);
    await client.close();

    const port = Number(new URL(everything.url).port);
    await everything.stop();
    assert.equal(await portIsFree(port), true, 'port released after stop()');
  });
});

describe('test/fixtures/chromium.sh (what Playwright starts as Chromium)', () => {
  test('merges every --disable-features and --enable-features into one of each and passes the rest unchanged, in order', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'sb-chromium-stub-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    // A stand-in for /usr/bin/chromium that prints the arguments it was given, one per line.
    const stub = join(dir, 'chromium');
    writeFileSync(stub, '#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done\n', { mode: 0o755 });
    const given = ['--disable-features=PaintHolding,HttpsUpgrades', '--headless', '--enable-features=A', '--remote-debugging-pipe', '--disable-features=WebUIOmniboxPopup', 'with space', '--enable-features=B'];
    const run = spawnSync(CHROMIUM_LAUNCHER, given, { env: { ...process.env, SB_CHROMIUM_BINARY: stub }, encoding: 'utf8' });
    assert.equal(run.status, 0, run.stderr);
    assert.deepEqual(run.stdout.split('\n').slice(0, -1), ['--headless', '--remote-debugging-pipe', 'with space', '--disable-features=PaintHolding,HttpsUpgrades,WebUIOmniboxPopup', '--enable-features=A,B']);
  });
});
