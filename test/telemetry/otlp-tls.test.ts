/**
 * An `https` collector whose certificate only the operator's CA vouches for: the exports trust it
 * exactly when `OTEL_EXPORTER_OTLP_CERTIFICATE` names that CA, as the SDK's own `node:https`
 * transport did (src/telemetry/otlp-http-delegate.ts `undiciTransportOf`, which reads the SDK's
 * merged options). A throwaway self-signed certificate for 127.0.0.1, made by openssl.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { convertLegacyHttpOptions } from '@opentelemetry/otlp-exporter-base/node-http';
import { undiciTransportOf } from '../../src/telemetry/otlp-http-delegate.js';

const dir = mkdtempSync(join(tmpdir(), 'otlp-tls-'));
const certFile = join(dir, 'cert.pem');
let server: Server;
let url: string;
let received = 0;

before(async () => {
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', join(dir, 'key.pem'), '-out', certFile, '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
  server = createServer({ key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(certFile) }, (req, res) => {
    req.resume();
    req.on('end', () => {
      received++;
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `https://127.0.0.1:${(server.address() as { port: number }).port}/v1/traces`;
});

after(async () => {
  await new Promise((resolve) => server.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

function transportWith(env: Record<string, string | undefined>) {
  const saved = { ...process.env };
  Object.assign(process.env, env);
  try {
    return undiciTransportOf(convertLegacyHttpOptions({ url }, 'TRACES', 'v1/traces', { 'Content-Type': 'application/json' }));
  } finally {
    for (const key of Object.keys(env)) if (saved[key] === undefined) delete process.env[key];
  }
}

test('without the CA the collector is not trusted: the export fails, nothing arrives', async () => {
  const transport = transportWith({ OTEL_EXPORTER_OTLP_CERTIFICATE: undefined });
  const result = await transport.send(Buffer.from('{}'), 5000);
  transport.shutdown();
  assert.notEqual(result.status, 'success');
  assert.equal(received, 0);
});

test('with OTEL_EXPORTER_OTLP_CERTIFICATE naming the CA, the export arrives', async () => {
  const transport = transportWith({ OTEL_EXPORTER_OTLP_CERTIFICATE: certFile });
  const result = await transport.send(Buffer.from('{}'), 5000);
  transport.shutdown();
  assert.equal(result.status, 'success', JSON.stringify(result));
  assert.equal(received, 1);
});
