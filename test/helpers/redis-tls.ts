/**
 * A Redis that speaks TLS only (`--port 0 --tls-port …`), with a certificate authority made
 * for the occasion by `openssl`: the server's certificate names `redis.test` (not the
 * address it listens on, so only `servername` makes it verify), clients must present a
 * certificate of the same CA (`--tls-auth-clients yes`), and the only user is an ACL user
 * with a password (the default user is off). Everything lives in a temporary directory.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { waitUntil } from './child.js';
import { freePort } from './free-port.js';
import { commandOnce, SERVER_READY_MS, spawnRedisServer, type RedisProcess } from './redis-processes.js';

const run = promisify(execFile);

export interface TlsRedisHandle {
  /** `rediss://127.0.0.1:<port>` */
  url: string;
  port: number;
  /** PEM file paths: the CA, and the client's certificate and key. */
  ca: string;
  cert: string;
  key: string;
  /** The name the server's certificate carries. */
  servername: string;
  username: string;
  password: string;
  process: RedisProcess;
  stop(): Promise<void>;
}

const SERVERNAME = 'redis.test';

/** Makes a CA and two certificates it signs (server, client) in `dir`. */
async function makeCertificates(dir: string): Promise<void> {
  const openssl = (...args: string[]) => run('openssl', args, { cwd: dir, timeout: 30_000 });
  await openssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=switchboard test CA');
  await writeFile(join(dir, 'server.ext'), `subjectAltName=DNS:${SERVERNAME}\n`);
  for (const name of ['server', 'client']) {
    await openssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name === 'server' ? SERVERNAME : 'switchboard'}`);
    await openssl('x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', `${name}.pem`, '-days', '2', ...(name === 'server' ? ['-extfile', 'server.ext'] : []));
  }
}

export async function startTlsRedis(): Promise<TlsRedisHandle> {
  const dir = await mkdtemp(join(tmpdir(), 'sb-redis-tls-'));
  await makeCertificates(dir);
  const file = (name: string) => join(dir, name);
  const port = await freePort();
  const username = 'switchboard';
  const password = `pw-${port}`;
  const server = await spawnRedisServer({
    name: 'redis tls',
    port: 0,
    ping: false,
    args: [
      ...['--tls-port', String(port), '--tls-cert-file', file('server.pem'), '--tls-key-file', file('server.key'), '--tls-ca-cert-file', file('ca.pem'), '--tls-auth-clients', 'yes'],
      ...['--user', 'default', 'off', '--user', username, 'on', `>${password}`, '~*', '&*', '+@all'],
    ],
  });
  const handle: TlsRedisHandle = { url: `rediss://127.0.0.1:${port}`, port, ca: file('ca.pem'), cert: file('client.pem'), key: file('client.key'), servername: SERVERNAME, username, password, process: server, stop: () => server.stop() };
  try {
    await waitUntil(async () => ((await pingTls(handle)) ? true : undefined), { what: `Redis TLS PING on :${port}`, timeoutMs: SERVER_READY_MS, details: () => server.child.logs() });
  } catch (err) {
    await server.stop();
    throw err;
  }
  return handle;
}

/** One PING over TLS with the test CA, client certificate and user. */
async function pingTls(h: TlsRedisHandle): Promise<boolean> {
  const tls = { ca: await readFile(h.ca, 'utf8'), cert: await readFile(h.cert, 'utf8'), key: await readFile(h.key, 'utf8'), servername: h.servername };
  return (await commandOnce({ port: h.port, tls, username: h.username, password: h.password }, 'PING')) === 'PONG';
}
