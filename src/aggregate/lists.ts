/**
 * `tools/list`, `prompts/list`, `resources/list` and `resources/templates/list` on the
 * aggregated endpoint (MCP 2025-11-25 "Pagination"): the backends' lists are walked one
 * after another, a backend page per client page, under one composite cursor. A backend that
 * fails or is too slow is skipped (logged), so the client still gets everyone else's items;
 * backends that did not declare the capability are not asked. A backend's page is read strictly
 * (backends/strict-answer.ts, issue 41 §1): one that is not exactly one response to the request
 * (a string id for a numeric one, a BOM, a duplicate, a batch, two candidates) is left out too.
 */
import { BackendError } from '../backends/errors.js';
import type { BackendResponse } from '../backends/backend.js';
import { idKey, readStrictAnswer, unreadableError } from '../backends/strict-answer.js';
import { ErrorCode, type JsonRpcId, type JsonRpcMessage } from '../wire/jsonrpc.js';
import { decodeCursor, encodeCursor } from './cursor.js';
import type { AggregateCall, Members } from './members.js';
import type { MemberLinker } from './member-link.js';
import type { McpBackend } from '../backends/backend.js';
import { provisionalList } from '../linking/provisional.js';
import { CATALOG_LISTS } from '../linking/catalog.js';
import { resultToClient } from './rewrite.js';
import { errorReply, jsonResponse } from './responses.js';

/** The list methods, with the capability a backend must declare and the result key that holds the items. */
export const LIST_METHODS: Record<string, { capability: string; key: string }> = {
  'tools/list': { capability: 'tools', key: 'tools' },
  'prompts/list': { capability: 'prompts', key: 'prompts' },
  'resources/list': { capability: 'resources', key: 'resources' },
  'resources/templates/list': { capability: 'resources', key: 'resourceTemplates' },
  // MCP 2025-11-25 "Tasks": each member's tasks, ids qualified with the member (extensions.ts).
  'tasks/list': { capability: 'tasks', key: 'tasks' },
};

export async function listPage(members: Members, linker: MemberLinker, call: AggregateCall, message: JsonRpcMessage & { id: JsonRpcId; method: string }): Promise<BackendResponse> {
  const { capability, key } = LIST_METHODS[message.method]!;
  const params = (message.params ?? {}) as { cursor?: unknown };
  const order = Object.keys(call.map);
  const eligible = (name: string) => Boolean(members.member(call, name) && call.map[name]!.capabilities.includes(capability));
  let position: { backend: string; cursor?: string } | undefined;
  if (params.cursor === undefined) {
    const first = order.find(eligible);
    if (!first) return jsonResponse({ jsonrpc: '2.0', id: message.id, result: { [key]: [] } });
    position = { backend: first };
  } else {
    position = decodeCursor(params.cursor, order);
    if (!position) return errorReply(message.id, ErrorCode.InvalidParams, 'Invalid params: unknown or malformed cursor');
  }
  const nextEligible = (after: string) => order.slice(order.indexOf(after) + 1).find(eligible);

  // Bounded: each turn moves to a later backend.
  for (let at: typeof position | undefined = position; at; ) {
    const page = eligible(at.backend) ? await fetchPage(members, linker, call, at, message) : undefined;
    const following = nextEligible(at.backend);
    if (page?.nextCursor !== undefined) {
      return pageReply(message.id, key, page.items, encodeCursor({ backend: at.backend, cursor: page.nextCursor }));
    }
    if (page && page.items.length) return pageReply(message.id, key, page.items, following && encodeCursor({ backend: following }));
    at = following ? { backend: following } : undefined;
  }
  return pageReply(message.id, key, [], undefined);
}

function pageReply(id: JsonRpcId, key: string, items: unknown[], nextCursor: string | undefined): BackendResponse {
  return jsonResponse({ jsonrpc: '2.0', id, result: nextCursor === undefined ? { [key]: items } : { [key]: items, nextCursor } });
}

/** One backend's page, rewritten for the client; undefined when the backend could not give it. */
async function fetchPage(members: Members, linker: MemberLinker, call: AggregateCall, at: { backend: string; cursor?: string }, message: JsonRpcMessage & { id: JsonRpcId; method: string }): Promise<{ items: unknown[]; nextCursor?: string } | undefined> {
  const member = members.member(call, at.backend)!;
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), members.fanoutTimeoutMs);
  try {
    // Without a linked account the list is asked for without a token, as initialize is:
    // servers that let anyone see what they offer show their tools. A server that refuses
    // (401), or one still waiting for the link, is answered for from the catalog.
    const authorization = await members.tokenIfAny(call.caller, member.backend);
    let session = member.session;
    if (session.pending) {
      const opened = authorization ? await linker.open(call, at.backend, member.backend) : undefined;
      if (!opened) return await provisionalPage(members, call, member.backend, message.method);
      session = opened;
    }
    const params = { ...((message.params ?? {}) as Record<string, unknown>) };
    if (at.cursor === undefined) delete params.cursor;
    else params.cursor = at.cursor;
    const res = await members.post(call, member.backend, session, { jsonrpc: '2.0', id: message.id, method: message.method, params }, authorization, controller.signal);
    if (res.status === 401 && member.backend.config.upstreamAuth) {
      await res.body.dump().catch(() => {});
      return await provisionalPage(members, call, member.backend, message.method);
    }
    if (res.status !== 200) {
      await res.body.dump().catch(() => {});
      throw new BackendError(at.backend, 'bad_status', `answered ${message.method} with HTTP ${res.status}`, res.status);
    }
    // Read strictly (issue 41 §1): what the client is shown must be the one response to this request.
    const read = await readStrictAnswer(res, { judged: [message.id], sent: [message.id], batch: false });
    if ('unreadable' in read) throw unreadableError(at.backend, read.unreadable);
    const response = read.responses.get(idKey(message.id));
    if (!response?.result) throw new Error(response?.error ? `refused ${message.method}: ${response.error.message}` : `did not answer ${message.method}`);
    if (member.backend.config.upstreamAuth && at.cursor === undefined) await members.catalog.rememberList(member.backend.config, message.method, response.result, authorization ? 'user' : 'anonymous');
    // A member with a tool policy answered through it already (policy/tool-policy-backend.ts).
    return pageOf(at.backend, message.method, response.result);
  } catch (err) {
    const reason = controller.signal.aborted ? `no answer within ${members.fanoutTimeoutMs} ms` : (err as Error).message;
    call.caller.log.warn({ backend: at.backend, method: message.method, err: reason }, 'backend left out of an aggregated list');
    return undefined;
  } finally {
    clearTimeout(timer);
  }
}

/** A backend's list result as the client sees it: names rewritten, cursor kept. */
function pageOf(backend: string, method: string, result: unknown): { items: unknown[]; nextCursor?: string } {
  const { key } = LIST_METHODS[method]!;
  const rewritten = resultToClient(backend, method, result) as Record<string, unknown>;
  const items = Array.isArray(rewritten[key]) ? (rewritten[key] as unknown[]) : [];
  const nextCursor = typeof rewritten.nextCursor === 'string' && rewritten.nextCursor !== '' ? rewritten.nextCursor : undefined;
  return { items, nextCursor };
}

/** The catalog's page of a member whose account is not linked (linking/provisional.ts); the session waits for the link. */
async function provisionalPage(members: Members, call: AggregateCall, backend: McpBackend, method: string): Promise<{ items: unknown[] }> {
  await members.waitForLink(call, backend);
  // Only what a catalog keeps (tools, prompts, resources) is known before the link; not tasks.
  if (!(method in CATALOG_LISTS)) return { items: [] };
  const { items } = pageOf(backend.name, method, await provisionalList(backend.config, members.catalog, method));
  return { items };
}
