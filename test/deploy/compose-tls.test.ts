/**
 * The compose stack's optional TLS front (issue 32 §3b): the `tls` profile of
 * docker-compose.yml runs Caddy with deploy/compose/Caddyfile. No container engine exists
 * here, so the compose file is parsed and interpolated as `docker compose --profile tls`
 * would (test/deploy/support.ts) and the Caddyfile is parsed (caddyfile.ts); checked: the
 * proxy reaches the gateway's service and port, SSE passes unbuffered with no response
 * timeout, the host Caddy serves is the host of the gateway's https publicUrl, and the
 * gateway's config is valid with that publicUrl.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { parseConfig } from '../../src/config/load.js';
import { find, parseCaddyfile } from './caddyfile.js';
import { composeInterpolateTree, readRepoFile } from './support.js';

interface Service {
  image?: string;
  profiles?: string[];
  ports?: string[];
  volumes?: string[];
  environment?: Record<string, string>;
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test: string[] };
}
type Compose = { services: Record<string, Service>; volumes: Record<string, unknown> };

const raw = parseYaml(readRepoFile('docker-compose.yml'), { merge: true }) as unknown;
/** The stack as `docker compose --profile tls` sees it with the shell environment `env`. */
const stack = (env: Record<string, string> = {}) => composeInterpolateTree(raw, env) as Compose;
const caddyfile = parseCaddyfile(readRepoFile('deploy/compose/Caddyfile'));
const [globalOptions, site] = caddyfile;

/** The gateway's config as the switchboard container reads it with this compose environment. */
function gatewayConfig(compose: Compose) {
  const mount = compose.services.switchboard!.volumes!.find((v) => v.includes('/etc/switchboard/'))!;
  return parseConfig(parseYaml(readRepoFile(mount.split(':')[0]!.replace(/^\.\//, ''))), compose.services.switchboard!.environment);
}

describe('the tls profile of docker-compose.yml', () => {
  const compose = stack();
  const proxy = compose.services.tls!;

  test('is a pinned Caddy image that only the tls profile starts, after a healthy gateway', () => {
    assert.deepEqual(proxy.profiles, ['tls']);
    assert.match(proxy.image ?? '', /^caddy:2\.\d+/, 'a pinned Caddy 2 image');
    assert.deepEqual(proxy.depends_on, { switchboard: { condition: 'service_healthy' } });
    assert.equal(proxy.healthcheck?.test[0], 'CMD');
  });

  test('publishes 443 (TCP and UDP for HTTP/3) and 80 (ACME HTTP challenge, redirect)', () => {
    assert.deepEqual(proxy.ports, ['80:80', '443:443', '443:443/udp']);
  });

  test('mounts the Caddyfile read-only where Caddy reads it, and keeps certificates in volumes', () => {
    assert.ok(proxy.volumes!.includes('./deploy/compose/Caddyfile:/etc/caddy/Caddyfile:ro'));
    for (const [volume, path] of [['caddy-data', '/data'], ['caddy-config', '/config']]) {
      assert.ok(proxy.volumes!.includes(`${volume}:${path}`), path);
      assert.ok(volume! in compose.volumes, `volume ${volume} is declared`);
    }
  });

  test('without the profile the gateway keeps its http publicUrl', () => {
    assert.equal(gatewayConfig(compose).publicUrl, 'http://localhost:8080');
  });
});

describe('deploy/compose/Caddyfile', () => {
  test('serves SWITCHBOARD_HOST, localhost by default (Caddy then uses its internal CA)', () => {
    assert.equal(globalOptions!.name, '', 'a global options block first');
    assert.equal(site!.name, '{$SWITCHBOARD_HOST:localhost}');
    assert.equal(stack().services.tls!.environment!.SWITCHBOARD_HOST, 'localhost');
    assert.equal(stack({ SWITCHBOARD_HOST: 'mcp.example.com' }).services.tls!.environment!.SWITCHBOARD_HOST, 'mcp.example.com');
    assert.equal(find(caddyfile, '', 'local_certs'), undefined, 'a public host name still gets an ACME certificate');
  });

  test("proxies to the gateway's service name and listen port", () => {
    const compose = stack();
    const proxyTo = find(site!.children, 'reverse_proxy');
    const config = gatewayConfig(compose);
    assert.deepEqual(proxyTo?.args, [`switchboard:${config.listen.port}`]);
    assert.ok(compose.services.switchboard, 'the upstream is a compose service');
  });

  test('SSE-friendly: flushed at once, no response timeout, open streams kept across reloads', () => {
    const proxyTo = find(site!.children, 'reverse_proxy')!;
    assert.deepEqual(find(proxyTo.children, 'flush_interval')?.args, ['-1']);
    assert.deepEqual(find(proxyTo.children, 'stream_close_delay')?.args, ['1h']);
    const transport = find(proxyTo.children, 'transport')!;
    assert.deepEqual(transport.args, ['http']);
    for (const timeout of ['read_timeout', 'write_timeout', 'response_header_timeout']) assert.equal(find(transport.children, timeout), undefined, `${timeout} would cut streams`);
    const timeouts = find(globalOptions!.children, 'servers', 'timeouts')!;
    assert.equal(find(timeouts.children, 'write'), undefined, 'no server write timeout');
    // A request must arrive whole as fast as the gateway demands it (limits.bodyTimeout, 30 s).
    const bodyTimeoutMs = gatewayConfig(stack()).limits.bodyTimeout;
    assert.deepEqual(find(timeouts.children, 'read_body')?.args, [`${bodyTimeoutMs / 1000}s`]);
  });

  test('with the profile and PUBLIC_URL=https://<host>: the gateway is valid and accepts the Host Caddy forwards', () => {
    for (const host of ['localhost', 'mcp.example.com']) {
      const compose = stack({ SWITCHBOARD_HOST: host, PUBLIC_URL: `https://${host}` });
      const config = gatewayConfig(compose);
      assert.equal(config.publicUrl, `https://${host}`);
      // Caddy's reverse_proxy passes the client's Host on; the gateway accepts publicUrl's host.
      assert.equal(new URL(config.publicUrl).host, compose.services.tls!.environment!.SWITCHBOARD_HOST);
    }
  });
});
