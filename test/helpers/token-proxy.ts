/**
 * Test-only reverse proxy that adds `Authorization: Bearer <token>` to every request.
 *
 * Lets clients that cannot send a token (e.g. the MCP conformance suite) talk to an endpoint
 * that requires one. It listens on 127.0.0.1, forwards any method, path and query verbatim to
 * the target's origin, streams request and response bodies in both directions without
 * buffering (SSE flows event by event), keeps status and headers (mcp-session-id,
 * content-type, last-event-id, ...) and aborts the upstream request when the client goes away.
 *
 * The proxy URL has the same path (and query) as the target, so a client given `url` hits
 * exactly the target URL.
 *
 * Host header (DNS-rebinding tests send forged Host/Origin headers):
 *  - 'auto' (default): a Host that names the proxy itself (127.0.0.1:<port>, localhost:<port>,
 *    [::1]:<port>) is rewritten to the target's host, as if the client had connected to the
 *    target directly; any other Host (e.g. evil.example.com) is forwarded unchanged.
 *  - 'preserve': always forward the client's Host.
 *  - 'target': always send the target's host.
 * The Origin header is always forwarded unchanged.
 */
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';

export interface TokenProxy {
  /** Proxy URL: http://127.0.0.1:<port> + target path + target query. */
  url: string;
  /** Stops listening, aborts in-flight exchanges. */
  close(): Promise<void>;
}

export interface TokenProxyOptions {
  host?: 'auto' | 'preserve' | 'target';
}

/** Hop-by-hop headers (RFC 9110 §7.6.1) — never forwarded. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/** Copies raw headers minus hop-by-hop ones (and those named in `Connection`) and the `skip` set. */
function filterRawHeaders(raw: string[], skip: ReadonlySet<string>): string[] {
  const connectionTokens = new Set<string>();
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() === 'connection') {
      for (const t of raw[i + 1]!.split(',')) connectionTokens.add(t.trim().toLowerCase());
    }
  }
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower) || connectionTokens.has(lower) || skip.has(lower)) continue;
    out.push(name, raw[i + 1]!);
  }
  return out;
}

export async function startTokenProxy(
  target: string,
  token: string | (() => Promise<string>),
  opts: TokenProxyOptions = {},
): Promise<TokenProxy> {
  const targetUrl = new URL(target);
  if (targetUrl.protocol !== 'http:' && targetUrl.protocol !== 'https:') {
    throw new Error(`token proxy: unsupported target protocol ${targetUrl.protocol}`);
  }
  const transport = targetUrl.protocol === 'https:' ? https : http;
  const agent = new transport.Agent({ keepAlive: true });
  const hostMode = opts.host ?? 'auto';
  const getToken = typeof token === 'string' ? async () => token : token;
  const inflight = new Set<http.ClientRequest>();
  let selfHosts = new Set<string>();

  const server = http.createServer((req, res) => {
    void forward(req, res);
  });

  async function forward(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    res.socket?.setNoDelay(true);
    let bearer: string;
    try {
      bearer = await getToken();
    } catch (error) {
      res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(`token proxy: could not obtain token: ${(error as Error).message}`);
      req.resume();
      return;
    }

    const clientHost = req.headers.host;
    let host: string;
    if (hostMode === 'target' || clientHost === undefined) host = targetUrl.host;
    else if (hostMode === 'preserve') host = clientHost;
    else host = selfHosts.has(clientHost.toLowerCase()) ? targetUrl.host : clientHost;

    const headers = filterRawHeaders(req.rawHeaders, new Set(['host', 'authorization']));
    headers.push('Host', host, 'Authorization', `Bearer ${bearer}`);

    const upstream = transport.request({
      protocol: targetUrl.protocol,
      hostname: targetUrl.hostname.replace(/^\[|\]$/g, ''),
      port: targetUrl.port || (targetUrl.protocol === 'https:' ? 443 : 80),
      method: req.method,
      path: req.url ?? '/',
      headers,
      agent,
      // Responses are streamed through; nothing to time out on long-lived SSE.
      timeout: 0,
    });
    inflight.add(upstream);
    upstream.on('close', () => inflight.delete(upstream));

    // Client went away (aborted request or closed the response early): drop the upstream exchange.
    res.on('close', () => {
      if (!res.writableFinished) upstream.destroy();
    });

    upstream.on('response', (upRes) => {
      const resHeaders = filterRawHeaders(upRes.rawHeaders, new Set());
      res.writeHead(upRes.statusCode ?? 502, upRes.statusMessage, resHeaders);
      res.flushHeaders();
      upRes.on('data', (chunk: Buffer) => {
        // Write each chunk as it arrives; honour backpressure.
        if (!res.write(chunk)) {
          upRes.pause();
          res.once('drain', () => upRes.resume());
        }
      });
      upRes.on('end', () => res.end());
      upRes.on('error', () => res.destroy());
      upRes.on('close', () => {
        if (!upRes.complete) res.destroy();
      });
    });

    upstream.on('error', (error) => {
      if (!res.headersSent) {
        res.writeHead(502, { 'content-type': 'text/plain' });
        res.end(`token proxy: upstream error: ${error.message}`);
      } else {
        res.destroy();
      }
    });

    req.pipe(upstream);
    req.on('error', () => upstream.destroy());
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  selfHosts = new Set([`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`]);

  let closed: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${port}${targetUrl.pathname}${targetUrl.search}`,
    close: () => {
      closed ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const r of inflight) r.destroy();
        server.closeAllConnections();
        agent.destroy();
      });
      return closed;
    },
  };
}
