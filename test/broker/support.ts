/**
 * What the broker-mode tests share (issue 19): an in-memory OAuth client for the MCP SDK whose
 * `redirectToAuthorization` hands the URL to the test (which drives Chromium with it), a tiny
 * loopback server that catches the redirect back with the code (as a desktop MCP client's
 * own callback listener does), a loopback server for a Client ID Metadata Document, and
 * signing keys the way an operator makes them (`openssl genpkey` → PEM).
 */
import { createHash, generateKeyPairSync, randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';

/** An EC P-256 private key as PEM (what `openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256` writes). */
export function ecPem(): string {
  return generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
}

/** An RSA private key as PEM. */
export function rsaPem(bits = 2048): string {
  return generateKeyPairSync('rsa', { modulusLength: bits }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
}

/**
 * An authorization request to the broker at `base` (code, PKCE S256 with a fresh verifier,
 * state `st`, the resource `<base>/mcp/<backend>`), and its verifier; `params` adds to it or,
 * with undefined, leaves a parameter out.
 */
export function authorizationRequest(base: string, client: { clientId: string; redirectUri: string; backend: string }, params: Record<string, string | undefined> = {}): { url: string; verifier: string } {
  const verifier = randomBytes(32).toString('base64url');
  const query: Record<string, string | undefined> = {
    response_type: 'code',
    client_id: client.clientId,
    redirect_uri: client.redirectUri,
    state: 'st',
    code_challenge: createHash('sha256').update(verifier).digest('base64url'),
    code_challenge_method: 'S256',
    resource: `${base}/mcp/${client.backend}`,
    ...params,
  };
  const url = new URL(`${base}/oauth2/authorize`);
  for (const [k, v] of Object.entries(query)) if (v !== undefined) url.searchParams.set(k, v);
  return { url: url.href, verifier };
}

/** Something the test waits for once. */
export function deferred<T>(): { promise: Promise<T>; resolve(value: T): void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const close = (server: Server) => new Promise<void>((resolve) => server.close(() => resolve()));

/** The client's redirect URI: answers "done" and hands the code (or error) of each redirect to the test. */
export interface CallbackServer {
  url: string;
  /** The next redirect's query (code, state, error, iss). */
  next(): Promise<URLSearchParams>;
  close(): Promise<void>;
}

export async function startCallbackServer(): Promise<CallbackServer> {
  let waiting = deferred<URLSearchParams>();
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://callback');
    // Only the redirect counts (the browser also asks for /favicon.ico).
    if (url.pathname !== '/callback') return void res.writeHead(404).end();
    const query = url.searchParams;
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end('<!doctype html><link rel="icon" href="data:,"><title>Done</title><p>Return to the client.</p>');
    waiting.resolve(query);
  });
  const base = await listen(server);
  return {
    url: `${base}/callback`,
    async next() {
      const query = await waiting.promise;
      waiting = deferred();
      return query;
    },
    close: () => {
      server.closeAllConnections();
      return close(server);
    },
  };
}

/** Serves one Client ID Metadata Document at `<base>/client.json`, counting fetches. */
export async function startMetadataDocumentServer(metadata: (clientId: string) => Record<string, unknown>): Promise<{ clientId: string; fetches: () => number; close(): Promise<void> }> {
  let fetches = 0;
  let clientId = '';
  const server = createServer((req, res) => {
    if (req.url !== '/client.json') return void res.writeHead(404).end();
    fetches++;
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'max-age=3600' }).end(JSON.stringify(metadata(clientId)));
  });
  clientId = `${await listen(server)}/client.json`;
  return { clientId, fetches: () => fetches, close: () => close(server) };
}

/**
 * The MCP SDK's OAuth client state kept in memory, as a desktop client keeps it on disk.
 * `authorizations` receives each URL the SDK wants the user's browser to open.
 */
export class MemoryOAuthClient implements OAuthClientProvider {
  client?: OAuthClientInformationMixed;
  saved?: OAuthTokens;
  private verifier = '';
  readonly authorizations: URL[] = [];
  private waiting = deferred<URL>();

  constructor(
    private readonly callbackUrl: string,
    readonly clientMetadata: OAuthClientMetadata,
    preRegistered?: OAuthClientInformationMixed,
  ) {
    this.client = preRegistered;
  }

  get redirectUrl(): string {
    return this.callbackUrl;
  }

  clientInformation() {
    return this.client;
  }

  saveClientInformation(info: OAuthClientInformationMixed) {
    this.client = info;
  }

  tokens() {
    return this.saved;
  }

  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens;
  }

  redirectToAuthorization(url: URL) {
    this.authorizations.push(url);
    this.waiting.resolve(url);
  }

  /** The next URL the SDK sends the user's browser to. */
  async nextAuthorization(): Promise<URL> {
    const url = await this.waiting.promise;
    this.waiting = deferred();
    return url;
  }

  saveCodeVerifier(verifier: string) {
    this.verifier = verifier;
  }

  codeVerifier() {
    return this.verifier;
  }

  invalidateCredentials(scope: 'all' | 'client' | 'tokens' | 'verifier' | 'discovery') {
    if (scope === 'all' || scope === 'tokens') this.saved = undefined;
    if (scope === 'all' || scope === 'client') this.client = undefined;
  }
}

/** The payload of a JWT (no verification: the gateway's acceptance is what the tests check). */
export function jwtPayload(token: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8')) as Record<string, unknown>;
}

export function jwtHeader(token: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(token.split('.')[0]!, 'base64url').toString('utf8')) as Record<string, unknown>;
}
