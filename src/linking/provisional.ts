/**
 * Answers the gateway gives for a backend the user has not linked yet (SPEC §8 "Linking";
 * issue 12): the backend refuses everything without the user's token, so the gateway
 * speaks for it from its catalog (catalog.ts) until the link exists.
 *
 * - `initialize`: what the backend answered without a token, if it ever did, with
 *   `listChanged` announced on its lists (they change once the account is linked);
 *   otherwise a minimal result that offers tools (and prompts, where the catalog has some).
 *   Never what it answered another user (catalog.ts, issue 28).
 * - lists: the first page the catalog may show (the operator's, the backend's tokenless one,
 *   or an opted-in shared one), filtered by the backend's tool policy; with no tools list,
 *   one gateway tool, `connect`, whose description tells the model that calling it links the
 *   account. Other lists with nothing known are empty.
 * - `ping` and `logging/setLevel`: answered here.
 * - anything else (`tools/call`, `prompts/get`, `resources/read`, …): the elicitation that
 *   leads to the link (SPEC §4 step 2).
 */
import type { BackendConfig } from '../config/schema.js';
import type { Elicitation } from '../connect/elicitations.js';
import { elicitationRequiredMessages } from '../connect/elicitation-replies.js';
import type { JsonRpcId, JsonRpcMessage } from '../wire/jsonrpc.js';
import { isSupportedVersion, LATEST_PROTOCOL_VERSION } from '../wire/protocol.js';
import { filterToolsResult } from '../policy/tool-policy.js';
import { CATALOG_LISTS, shares, type BackendCatalog, type InitializeSnapshot } from './catalog.js';

/** The gateway's own tool on a backend whose tools are not known yet (`{backend}__connect` on `/mcp`). */
export const CONNECT_TOOL = 'connect';

/** The capabilities whose lists the gateway answers for while the account is not linked. */
export const LIST_CAPABILITIES = ['tools', 'prompts', 'resources'] as const;

export function connectTool(backend: BackendConfig): Record<string, unknown> {
  const provider = backend.upstreamAuth?.provider ?? backend.name;
  return {
    name: CONNECT_TOOL,
    title: `Connect your ${provider} account`,
    description:
      `The tools of "${backend.name}" need the user's ${provider} account, which is not connected yet. ` +
      `Calling this tool gives the user a link to connect it in their browser; once they have, ` +
      `the real tools of "${backend.name}" replace this one.`,
    inputSchema: { type: 'object', properties: {} },
  };
}

/**
 * The `initialize` result for a client whose account at this backend is not linked: the
 * backend's tokenless result, or a minimal one. The revision is the client's when the
 * gateway supports it (the backend will be asked for that same one once it can be reached).
 */
export function provisionalInitializeResult(backend: BackendConfig, snapshot: InitializeSnapshot | undefined, requestedVersion: unknown): Record<string, unknown> {
  const capabilities: Record<string, unknown> = { ...(snapshot?.capabilities ?? {}) };
  capabilities.tools ??= {};
  if (backend.upstreamAuth?.catalog?.prompts || shares(backend, 'prompts/list')) capabilities.prompts ??= {};
  for (const list of LIST_CAPABILITIES) {
    const value = capabilities[list];
    if (value && typeof value === 'object') capabilities[list] = { ...(value as object), listChanged: true };
  }
  const provider = backend.upstreamAuth?.provider ?? backend.name;
  const result: Record<string, unknown> = {
    protocolVersion: typeof requestedVersion === 'string' && isSupportedVersion(requestedVersion) ? requestedVersion : LATEST_PROTOCOL_VERSION,
    capabilities,
    serverInfo: snapshot?.serverInfo ?? { name: backend.name, version: '0.0.0' },
  };
  const note = `Using "${backend.name}" needs the user's ${provider} account; a tool call gives the link to connect it.`;
  result.instructions = snapshot?.instructions ? `${snapshot.instructions}\n\n${note}` : note;
  return result;
}

/** The lists a provisional `initialize` result announced (which `list_changed` the client expects). */
export function announcedLists(result: Record<string, unknown>): string[] {
  const capabilities = (result.capabilities ?? {}) as Record<string, unknown>;
  return LIST_CAPABILITIES.filter((list) => capabilities[list] !== undefined);
}

/** A list result while unlinked: the page the catalog may show this user (policy-filtered, without its cursor) or the gateway's own. */
export async function provisionalList(backend: BackendConfig, catalog: BackendCatalog, method: string): Promise<Record<string, unknown>> {
  const key = CATALOG_LISTS[method]!;
  const cached = await catalog.list(backend, method);
  if (cached) {
    // A later page cannot be fetched without the account: the first page is all there is.
    const { nextCursor: _dropped, ...page } = cached;
    return method === 'tools/list' ? (filterToolsResult(backend, page) as Record<string, unknown>) : page;
  }
  return { [key]: method === 'tools/list' ? [connectTool(backend)] : [] };
}

/** Whether the gateway answers this request itself while unlinked (the rest lead to the link). */
export function answeredProvisionally(method: string): boolean {
  return method === 'ping' || method === 'logging/setLevel' || method in CATALOG_LISTS;
}

export interface UnlinkedRequests {
  backend: BackendConfig;
  catalog: BackendCatalog;
  requests: ReadonlyArray<JsonRpcMessage & { id: JsonRpcId; method: string }>;
  /** Starts the elicitation; called at most once, and only when a request needs the link. */
  elicit(): Promise<Elicitation>;
  publicUrl: string;
  urlMode: boolean;
}

/** One answer per request, in order. */
export async function answerUnlinked(input: UnlinkedRequests): Promise<JsonRpcMessage[]> {
  let elicitation: Promise<Elicitation> | undefined;
  const answers: JsonRpcMessage[] = [];
  for (const request of input.requests) {
    if (request.method === 'ping' || request.method === 'logging/setLevel') {
      answers.push({ jsonrpc: '2.0', id: request.id, result: {} });
    } else if (request.method in CATALOG_LISTS) {
      answers.push({ jsonrpc: '2.0', id: request.id, result: await provisionalList(input.backend, input.catalog, request.method) });
    } else {
      elicitation ??= input.elicit();
      answers.push(...elicitationRequiredMessages([request], await elicitation, input.publicUrl, input.urlMode));
    }
  }
  return answers;
}
