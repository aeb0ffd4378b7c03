/**
 * The gateway as the 2026-07-28 client of a backend, for the clients it bridges (issue 42 §2,
 * §3): a `tools/call` carries the `Mcp-Param-*` headers of the tool's `x-mcp-header` marks
 * (Transports §Custom Headers from Tool Parameters), and a tool whose marks are invalid is left
 * out of the lists and its calls refused, as a conforming client does. Only adapted sessions
 * (modern-era-backend.ts) come here: a 2025-11-25 client on `/mcp/{backend}`, and every path that
 * reaches a 2026 backend through such a session — `/mcp`, virtual servers (whose fixed values
 * are set by then), tool search's `call_tool`, a 2026 client bridged by `/mcp`. The call is read
 * under the backend's own tool name and arguments, so a renamed tool mirrors what the backend
 * declared. A 2026 client on `/mcp/{backend}` is not bridged: it mirrors headers itself.
 *
 * A tool's marks come from the tools this user's session was listed by the backend (the
 * client's own `tools/list` answers, as they pass), never another user's; a tool not seen has
 * the backend's list read for the session first (at most {@link MAX_PAGES} pages, one listing
 * for concurrent calls), and the book is kept for {@link TTL_MS}. A backend refusing a call
 * with -32020 (`HeaderMismatch`) after headers taken from the book has its list read again and
 * the call sent once more (§Client Behavior: a changed `inputSchema`).
 */
import { randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import { ErrorCode, type JsonRpcId } from '../../wire/jsonrpc.js';
import { paramHeadersOf, scanParamHeaders, type ParamHeaderScan } from '../../wire/param-headers.js';
import type { BackendCallHeaders, BackendResponse } from '../backend.js';
import { BackendMessages, parseObject, type BackendMessage } from '../backend-messages.js';
import { syntheticBody, withBody } from '../body.js';
import { BackendError } from '../errors.js';

/** How long a session's tools are taken as the backend listed them. */
export const TTL_MS = 5 * 60_000;
/** Pages of `tools/list` read to find one tool. */
export const MAX_PAGES = 10;
/** Tools kept per session, and sessions kept per backend (the oldest go first). */
const MAX_TOOLS = 5_000;
const MAX_BOOKS = 2_000;

type Request = BackendMessage & { id: JsonRpcId };

/** One session's tools as the backend listed them; `listed`: read by the gateway itself, so a tool missing there is not in the list. */
interface Book {
  at: number;
  listed: boolean;
  tools: Map<string, ParamHeaderScan>;
}

/** A request of one adapted session, and how to send one as the backend must get it. */
export interface SessionCall {
  backend: string;
  /** The session and its user: whose tools these are. */
  sessionId: string;
  userKey: string;
  /** A request of the session with its `_meta` and standard headers (modern-era-backend.ts `#modern`). */
  modern(message: Request): { message: Request; headers: BackendCallHeaders };
  post(body: string, headers: BackendCallHeaders, signal?: AbortSignal): Promise<BackendResponse>;
  log?: FastifyBaseLogger;
  signal?: AbortSignal;
}

export class ToolHeaders {
  readonly #books = new Map<string, Book>();
  readonly #listings = new Map<string, Promise<Book>>();

  /**
   * The request sent to the backend (already with its `_meta` and standard headers): a
   * `tools/call` with its `Mcp-Param-*` headers, or refused here when the tool's marks are
   * invalid; anything else as it is. The headers sent come back, for the retries of
   * input-rounds.ts.
   */
  async send(call: SessionCall, request: Request, headers: BackendCallHeaders): Promise<{ res: BackendResponse; headers: BackendCallHeaders }> {
    const params = request.params as Record<string, unknown> | undefined;
    if (request.method !== 'tools/call' || typeof params?.name !== 'string') return { res: await call.post(JSON.stringify(request), headers, call.signal), headers };
    const body = JSON.stringify(request);
    let mirrored = await this.#mirror(call, params.name, params.arguments, headers, false);
    if ('refused' in mirrored) return { res: refusal(request.id, call.backend, params.name, mirrored.refused), headers };
    let res = await call.post(body, mirrored.headers, call.signal);
    if (mirrored.fresh || res.status !== 400 || res.contentType !== 'application/json') return { res, headers: mirrored.headers };
    const text = await res.body.text();
    if ((parseObject(text)?.error as { code?: unknown } | undefined)?.code !== ErrorCode.HeaderMismatch) return { res: withBody(res, syntheticBody(text)), headers: mirrored.headers };
    call.log?.info({ backend: call.backend, tool: params.name }, 'backend refused the Mcp-Param-* headers; reading its tools again');
    mirrored = await this.#mirror(call, params.name, params.arguments, headers, true);
    if ('refused' in mirrored) return { res: refusal(request.id, call.backend, params.name, mirrored.refused), headers };
    res = await call.post(body, mirrored.headers, call.signal);
    return { res, headers: mirrored.headers };
  }

  /**
   * A `tools/list` result on its way to the bridged client: its tools kept for the session's
   * calls, and those with invalid marks left out (logged with the reason, §Schema Extension).
   * Anything else, or a list with nothing to leave out, comes back as it is (the same object).
   */
  listed(call: SessionCall, message: BackendMessage): BackendMessage {
    const result = message.result as { tools?: unknown } | undefined;
    if (!result || !Array.isArray(result.tools)) return message;
    const book = this.#book(key(call), false);
    const kept: unknown[] = [];
    for (const tool of result.tools as Array<Record<string, unknown> | null>) {
      const scan = tool && typeof tool.name === 'string' ? record(book, tool.name, tool.inputSchema) : undefined;
      if (scan && !scan.valid) call.log?.warn({ backend: call.backend, tool: tool!.name, reason: scan.reason }, 'tool left out of the list: invalid x-mcp-header');
      else kept.push(tool);
    }
    return kept.length === result.tools.length ? message : { ...message, result: { ...result, tools: kept } };
  }

  /** The headers with the call's `Mcp-Param-*`, or why the tool is refused; `fresh` when the tools were read for this call. */
  async #mirror(call: SessionCall, name: string, args: unknown, headers: BackendCallHeaders, again: boolean): Promise<{ headers: BackendCallHeaders; fresh: boolean } | { refused: string }> {
    const k = key(call);
    let book = again ? undefined : this.#current(k);
    let scan = book?.tools.get(name);
    const fresh = scan === undefined && !book?.listed;
    if (fresh) {
      book = await this.#listOnce(call, k);
      scan = book.tools.get(name);
    }
    if (!scan) return { headers, fresh }; // Not a tool of the backend's list: the backend answers for it.
    if (!scan.valid) return { refused: scan.reason };
    if (!scan.headers.length) return { headers, fresh };
    return { headers: { ...headers, protocolHeaders: { ...headers.protocolHeaders, ...paramHeadersOf(scan.headers, args) } }, fresh };
  }

  /** The session's tools read from the backend now, once for concurrent callers. */
  #listOnce(call: SessionCall, k: string): Promise<Book> {
    const running = this.#listings.get(k);
    if (running) return running;
    const listing = this.#list(call, k).finally(() => this.#listings.delete(k));
    this.#listings.set(k, listing);
    return listing;
  }

  async #list(call: SessionCall, k: string): Promise<Book> {
    const book: Book = { at: Date.now(), listed: true, tools: new Map() };
    let cursor: unknown;
    for (let page = 0; page < MAX_PAGES; page++) {
      const result = await this.#page(call, typeof cursor === 'string' ? cursor : undefined);
      if (!result || !Array.isArray(result.tools)) break;
      for (const tool of result.tools as Array<Record<string, unknown> | null>) if (tool && typeof tool.name === 'string') record(book, tool.name, tool.inputSchema);
      cursor = result.nextCursor;
      if (typeof cursor !== 'string') break;
    }
    this.#keep(k, book);
    return book;
  }

  /** One page of the backend's `tools/list` for the session: its result, or undefined when it gave none. */
  async #page(call: SessionCall, cursor: string | undefined): Promise<{ tools?: unknown; nextCursor?: unknown } | undefined> {
    const request = call.modern({ jsonrpc: '2.0', id: `switchboard-tools-${randomUUID()}`, method: 'tools/list', params: cursor === undefined ? {} : { cursor } });
    const res = await call.post(JSON.stringify(request.message), request.headers, call.signal).catch(() => undefined);
    if (!res) return undefined;
    if (res.status !== 200) {
      await res.body.dump().catch(() => {});
      return undefined;
    }
    const messages = new BackendMessages(res.body, res.contentType);
    try {
      for (let message = await messages.next(); message; message = await messages.next()) {
        if (message.method === undefined) return message.result as { tools?: unknown } | undefined;
      }
      return undefined;
    } finally {
      messages.close();
    }
  }

  #current(k: string): Book | undefined {
    const book = this.#books.get(k);
    if (book && Date.now() - book.at < TTL_MS) return book;
    if (book) this.#books.delete(k);
    return undefined;
  }

  /** The session's book to add a client's list page to: the current one, or a new one. */
  #book(k: string, listed: boolean): Book {
    const book = this.#current(k) ?? { at: Date.now(), listed, tools: new Map() };
    this.#keep(k, book);
    return book;
  }

  #keep(k: string, book: Book): void {
    this.#books.delete(k);
    this.#books.set(k, book);
    if (this.#books.size > MAX_BOOKS) this.#books.delete(this.#books.keys().next().value!);
  }
}

function key(call: SessionCall): string {
  return `${call.userKey}\n${call.sessionId}`;
}

function record(book: Book, name: string, inputSchema: unknown): ParamHeaderScan {
  const scan = scanParamHeaders(inputSchema);
  if (book.tools.size < MAX_TOOLS || book.tools.has(name)) book.tools.set(name, scan);
  return scan;
}

/** A tool a conforming client leaves out: the backend's fault, said as such (-32010, naming the tool and the reason). */
function refusal(id: JsonRpcId, backend: string, tool: string, reason: string): BackendResponse {
  const err = new BackendError(backend, 'protocol', `tool "${tool}" of backend "${backend}" has an invalid x-mcp-header annotation, so the gateway cannot send its arguments as the 2026-07-28 revision requires: ${reason}`, undefined, { tool });
  return { status: 200, headers: {}, contentType: 'application/json', body: syntheticBody(JSON.stringify(err.rpcError(id))) };
}
