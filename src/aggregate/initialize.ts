/**
 * `initialize` on the aggregated endpoint (MCP 2025-11-25 "Lifecycle"; SPEC §2 `/mcp`):
 * every backend the user may use is initialized in parallel with the client's own request,
 * and the client gets one answer — the union of their capabilities. A backend that is slow,
 * down or refuses is left out (and logged) after `aggregate.fanoutTimeout`; it does not hold
 * up or fail the session.
 */
import type { BackendResponse, McpBackend } from '../backends/backend.js';
import { collectMessages } from '../backends/backend-body.js';
import type { JsonRpcId, JsonRpcMessage } from '../wire/jsonrpc.js';
import { HEADER, isSupportedVersion, LATEST_PROTOCOL_VERSION } from '../wire/protocol.js';
import { headerValue } from '../wire/headers.js';
import type { AggregateCall, Members } from './members.js';
import { provisionalInitializeResult } from '../linking/provisional.js';
import { boundedClientInfo } from '../linking/unlinked-initialize.js';
import { mergeCapabilityTrees } from './extensions.js';
import { jsonResponse } from './responses.js';
import { encodeAggregateState, type MemberSession, type SessionMap } from './session-map.js';

export interface Joined {
  name: string;
  session: MemberSession;
  capabilities: Record<string, unknown>;
  instructions?: string;
}

/** Shown to clients as the server they talk to. */
export const AGGREGATE_SERVER_INFO = { name: 'switchboard', title: 'Switchboard MCP gateway', version: '0.1.0' };

export async function initializeAggregate(members: Members, call: AggregateCall, message: JsonRpcMessage & { id: JsonRpcId }): Promise<BackendResponse> {
  const candidates = members.allowed(call.caller);
  const outcomes = await Promise.allSettled(candidates.map((backend) => joinMember(members, call, backend, message)));
  const joined: Joined[] = [];
  const left: string[] = [];
  outcomes.forEach((outcome, i) => {
    if (outcome.status === 'fulfilled') joined.push(outcome.value);
    else {
      left.push(candidates[i]!.name);
      call.caller.log.warn({ backend: candidates[i]!.name, err: (outcome.reason as Error).message }, 'backend left out of the aggregated session for now');
    }
  });
  const map: SessionMap = Object.fromEntries(joined.map((j) => [j.name, j.session]));
  const params = (message.params ?? {}) as { protocolVersion?: unknown; clientInfo?: unknown };
  const requested = String(params.protocolVersion ?? '');
  const capabilities = unionOfCapabilities(joined.map((j) => j.capabilities));
  if (left.length || joined.some((j) => j.session.pending)) {
    // A backend that joins later (rejoin.ts) changes the lists: say that they can change.
    for (const name of LISTS) capabilities[name] = { ...((capabilities[name] as object | undefined) ?? {}), listChanged: true };
  }
  const result: Record<string, unknown> = {
    protocolVersion: isSupportedVersion(requested) ? requested : LATEST_PROTOCOL_VERSION,
    capabilities,
    serverInfo: AGGREGATE_SERVER_INFO,
  };
  const instructions = joined.filter((j) => j.instructions).map((j) => `[${j.name}] ${j.instructions}`);
  if (instructions.length) result.instructions = instructions.join('\n\n');
  call.caller.log.info({ joined: joined.map((j) => j.name), leftOut: left.length }, 'aggregated session initialized');
  // Kept in the session record to introduce the client to a backend that joins later: bounded (issue 13).
  const state = encodeAggregateState({ members: map, left, clientInfo: boundedClientInfo(params.clientInfo), announced: Object.keys(capabilities) });
  return jsonResponse({ jsonrpc: '2.0', id: message.id, result }, { [HEADER.sessionId]: state });
}

/** The capabilities with lists whose items come from the members. */
const LISTS = ['tools', 'prompts', 'resources'];

/** Initializes one member backend for the session (at initialize, or later for one that was left out). */
export async function joinMember(members: Members, call: AggregateCall, backend: McpBackend, message: JsonRpcMessage): Promise<Joined> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new Error(`no answer within ${members.fanoutTimeoutMs} ms`)), members.fanoutTimeoutMs);
  try {
    // As on /mcp/{backend}: initialize goes without a token when the user has none yet, so
    // that backends admitting it can join (and the account can be linked later).
    const authorization = await members.tokenIfAny(call.caller, backend);
    const res = await members.post(call, backend, undefined, message, authorization, controller.signal);
    if (res.status === 401 && backend.config.upstreamAuth) {
      // It needs the user's account: a member all the same, answered for until linked.
      await res.body.dump().catch(() => {});
      return waitingMember(members, call, backend, message, authorization !== undefined);
    }
    if (res.status !== 200) {
      await res.body.dump().catch(() => {});
      throw new Error(`answered initialize with HTTP ${res.status}`);
    }
    const sessionId = res.headers[HEADER.sessionId];
    const { messages } = await collectMessages(res);
    const response = messages.find((m) => m.id === message.id && ('result' in m || 'error' in m));
    const result = response?.result as { protocolVersion?: unknown; capabilities?: Record<string, unknown>; instructions?: unknown } | undefined;
    if (!result) throw new Error(response?.error ? `refused initialize: ${response.error.message}` : 'did not answer initialize');
    const version = String(result.protocolVersion);
    if (!isSupportedVersion(version)) throw new Error(`negotiated unsupported protocol version ${version}`);
    const capabilities = result.capabilities ?? {};
    if (backend.config.upstreamAuth) await members.catalog.rememberInitialize(backend.config, result, authorization ? 'user' : 'anonymous');
    return {
      name: backend.name,
      session: { sessionId: headerValue(sessionId), protocolVersion: version, capabilities: Object.keys(capabilities) },
      capabilities,
      instructions: typeof result.instructions === 'string' ? result.instructions : undefined,
    };
  } catch (err) {
    throw controller.signal.aborted ? (controller.signal.reason as Error) : err;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * A member that refused to join without the user's token: no backend session, the catalog's
 * capabilities and instructions (linking/provisional.ts), and a token it sent is forgotten.
 */
async function waitingMember(members: Members, call: AggregateCall, backend: McpBackend, message: JsonRpcMessage, sentToken: boolean): Promise<Joined> {
  if (sentToken) await members.forgetToken(call, backend);
  const requested = (message.params as { protocolVersion?: unknown } | undefined)?.protocolVersion;
  const result = provisionalInitializeResult(backend.config, await members.catalog.initialize(backend.config), requested);
  const capabilities = result.capabilities as Record<string, unknown>;
  return {
    name: backend.name,
    session: { protocolVersion: String(result.protocolVersion), capabilities: Object.keys(capabilities), pending: true },
    capabilities,
    instructions: result.instructions as string,
  };
}

/**
 * The server capabilities whose requests `/mcp` knows how to route to the right backend.
 * Others (experimental ones) are not announced: their requests could not be routed.
 */
const ROUTABLE_CAPABILITIES = new Set(['tools', 'prompts', 'resources', 'logging', 'completions']);
/** Capabilities that are trees of features, merged whole (extensions.ts); their requests route by qualified ids and names. */
const TREE_CAPABILITIES = new Set(['tasks', 'extensions']);

/** A capability is offered when any member offers it; a flag in it is true when any member sets it. */
export function unionOfCapabilities(all: Array<Record<string, unknown>>): Record<string, unknown> {
  const union: Record<string, Record<string, unknown>> = {};
  for (const capabilities of all) {
    for (const [name, value] of Object.entries(capabilities)) {
      if (TREE_CAPABILITIES.has(name) && value && typeof value === 'object') {
        union[name] = mergeCapabilityTrees(union[name] ?? {}, value as Record<string, unknown>);
        continue;
      }
      if (!ROUTABLE_CAPABILITIES.has(name)) continue;
      const merged = (union[name] ??= {});
      if (value && typeof value === 'object') {
        for (const [flag, v] of Object.entries(value as Record<string, unknown>)) {
          merged[flag] = typeof v === 'boolean' ? Boolean(merged[flag]) || v : (merged[flag] ?? v);
        }
      }
    }
  }
  return union;
}
