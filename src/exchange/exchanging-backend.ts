/**
 * A backend with `tokenExchange`, as the MCP layer sees it (SPEC §8): the same three verbs,
 * each sent with `Authorization: Bearer <a token exchanged for the caller>` — never the
 * caller's own token. So `/mcp/{backend}` (initialize, messages, the GET stream, the stream
 * opened ahead, DELETE), `/mcp` and WebSocket (which goes through `/mcp…` over loopback) all
 * get it without knowing about it, as they get a backend's static `headers`.
 *
 * A call that already names an Authorization (the aggregated endpoint asks
 * {@link TokenExchange.authorizationFor} itself, src/aggregate/members.ts) sends that one.
 * A 401 costs one fresh exchange and one retry; a second 401 is the error (the backend does
 * not accept what the exchange gives, which signing in again will not change).
 */
import type { BackendCallHeaders, BackendResponse, McpBackend } from '../backends/backend.js';
import { BackendError } from '../backends/errors.js';
import type { BackendConfig } from '../config/schema.js';
import type { TokenExchange } from './token-exchange.js';

export class ExchangingBackend implements McpBackend {
  readonly name: string;
  readonly config: BackendConfig;

  constructor(
    private readonly inner: McpBackend,
    private readonly exchange: TokenExchange,
  ) {
    this.name = inner.name;
    this.config = inner.config;
  }

  post(body: string, headers: BackendCallHeaders, signal?: AbortSignal): Promise<BackendResponse> {
    return this.#send(headers, (h) => this.inner.post(body, h, signal));
  }

  get(headers: BackendCallHeaders, signal?: AbortSignal): Promise<BackendResponse> {
    return this.#send(headers, (h) => this.inner.get(h, signal));
  }

  delete(headers: BackendCallHeaders, signal?: AbortSignal): Promise<BackendResponse> {
    return this.#send(headers, (h) => this.inner.delete(h, signal));
  }

  close(graceMs?: number): Promise<void> {
    return this.inner.close(graceMs);
  }

  async #send(headers: BackendCallHeaders, call: (h: BackendCallHeaders) => Promise<BackendResponse>): Promise<BackendResponse> {
    const { caller } = headers;
    const authorization = headers.authorization ?? (caller ? await this.exchange.authorizationFor(caller, this.config) : undefined);
    const res = await call({ ...headers, authorization });
    if (res.status !== 401 || !authorization || !caller?.subjectToken) return res;
    await res.body.dump().catch(() => {});
    caller.log.info({ backend: this.name }, 'backend refused the exchanged token; exchanging again once');
    const fresh = await this.exchange.authorizationFor(caller, this.config, { rejected: authorization });
    const again = await call({ ...headers, authorization: fresh });
    if (again.status !== 401) return again;
    await again.body.dump().catch(() => {});
    throw new BackendError(this.name, 'token_exchange', `backend "${this.name}" refused the token exchanged for this user (HTTP 401), a freshly exchanged one too; signing in again will not help: the exchange settings (audience, resource, scopes) must match what the backend accepts`, 401, {
      exchange: 'ok',
      signInAgain: false,
    });
  }
}

/** Puts the exchange in front of a backend with `tokenExchange`; any other is returned as it is. */
export function withTokenExchange(backend: McpBackend, exchange: TokenExchange): McpBackend {
  return backend.config.tokenExchange ? new ExchangingBackend(backend, exchange) : backend;
}
