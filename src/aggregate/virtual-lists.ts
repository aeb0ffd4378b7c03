/**
 * The list methods of a virtual server (issue 31 §1): the aggregated lists of its members
 * (lists.ts, every page walked here), narrowed to what the server's entries select and
 * rewritten as it offers them (virtual-tools.ts). A virtual server is a curated handful of
 * items, so it answers with one page: walking the members' pages here keeps the client from
 * meeting empty pages where nothing of a member's page was selected. The walk is bounded.
 */
import type { BackendCallHeaders, BackendResponse, McpBackend } from '../backends/backend.js';
import { collectMessages } from '../backends/backend-body.js';
import { ErrorCode, type JsonRpcId, type JsonRpcMessage } from '../wire/jsonrpc.js';
import { LIST_METHODS } from './lists.js';
import { errorReply, jsonResponse } from './responses.js';
import type { Selection } from './virtual-selection.js';
import { presentPrompt, presentTool } from './virtual-tools.js';

type Json = Record<string, unknown>;
type Request = JsonRpcMessage & { id: JsonRpcId; method: string };

/** Pages read from the members for one client list (each member's own pages, one after another). */
const MAX_PAGES = 100;

/** Definitions that contradict the config are logged once per process and key, not on every list. */
const reported = new Set<string>();

export async function virtualList(inner: McpBackend, selection: Selection, headers: BackendCallHeaders, request: Request): Promise<BackendResponse> {
  const { key } = LIST_METHODS[request.method]!;
  const params = (request.params ?? {}) as Json;
  if (params.cursor !== undefined) return errorReply(request.id, ErrorCode.InvalidParams, 'Invalid params: unknown cursor (this server lists everything on one page)');
  if (!asksMembers(selection, request.method)) return jsonResponse({ jsonrpc: '2.0', id: request.id, result: { [key]: [] } });
  const items: unknown[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < MAX_PAGES; page++) {
    const res = await inner.post(JSON.stringify({ ...request, params: cursor === undefined ? params : { ...params, cursor } }), headers);
    const answer = (await collectMessages(res)).messages.find((m) => m.id === request.id && ('result' in m || 'error' in m));
    if (!answer) return errorReply(request.id, ErrorCode.InternalError, `no answer to ${request.method} from the members`);
    const result = answer.result as Json | undefined;
    if (!result) return jsonResponse(answer);
    if (Array.isArray(result[key])) items.push(...(result[key] as unknown[]));
    cursor = typeof result.nextCursor === 'string' && result.nextCursor ? result.nextCursor : undefined;
    if (!cursor) break;
  }
  return jsonResponse({ jsonrpc: '2.0', id: request.id, result: { [key]: narrow(selection, request.method, items, headers) } });
}

/** A list whose items no entry selects is answered empty, without a round trip. */
function asksMembers(selection: Selection, method: string): boolean {
  if (method === 'prompts/list') return selection.prompts.length > 0;
  if (method === 'resources/list' || method === 'resources/templates/list') return selection.hasResources;
  return true;
}

function narrow(selection: Selection, method: string, items: unknown[], headers: BackendCallHeaders): unknown[] {
  const objects = items.filter((i): i is Json => typeof i === 'object' && i !== null);
  switch (method) {
    case 'tools/list':
      return tools(selection, objects, headers);
    case 'prompts/list': {
      const byName = new Map(objects.map((p) => [p.name, p]));
      return selection.prompts.flatMap((s) => (byName.has(s.qualified) ? [presentPrompt(s, byName.get(s.qualified)!)] : []));
    }
    case 'resources/list':
      return objects.filter((r) => selection.listsResource(r.uri));
    case 'resources/templates/list':
      return objects.filter((t) => selection.listsResource(t.uriTemplate));
    default:
      // tasks/list: the tasks this session's calls created, ids qualified with their member.
      return objects;
  }
}

/** The selected tools in the config's order, then the `connect` tools of members waiting for the user's link. */
function tools(selection: Selection, items: Json[], headers: BackendCallHeaders): Json[] {
  const byName = new Map(items.map((t) => [t.name, t]));
  const offered: Json[] = [];
  for (const selected of selection.tools) {
    const tool = byName.get(selected.qualified);
    if (!tool) continue;
    const presented = presentTool(selected, tool);
    if ('tool' in presented) offered.push(presented.tool);
    else if (!reported.has(presented.problem)) {
      reported.add(presented.problem);
      headers.caller?.log.error({ server: selection.name }, `virtual server tool left out: ${presented.problem}`);
    }
  }
  return [...offered, ...items.filter((t) => selection.isConnectTool(t.name))];
}
