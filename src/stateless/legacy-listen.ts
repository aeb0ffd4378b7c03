/**
 * `subscriptions/listen` of a 2026-07-28 client, for a backend of the 2025-11-25 era (issue 15,
 * "`subscriptions/listen` maps onto the backend's GET stream and `resources/subscribe`"; MCP
 * 2026-07-28 "Subscriptions").
 *
 * The listen stream is the standalone GET stream of the gateway's session with the backend
 * (legacy-sessions.ts: the same session the user's calls go through, so what those calls
 * trigger — a tool list that changed — is what this stream hears), plus `resources/subscribe`
 * for each resource the client asked to follow. What the client gets:
 *
 * - first `notifications/subscriptions/acknowledged`, naming the subset honoured: the
 *   list-change types the backend announced in `initialize`, the resources only when it
 *   offers `resources.subscribe`;
 * - then the backend's notifications of those types only (the filter is the gateway's to
 *   enforce), each tagged with `_meta` `io.modelcontextprotocol/subscriptionId` (the listen
 *   request's id);
 * - when the backend ends the stream, the listen's result (the subscription's graceful end).
 *
 * A server→client request on that stream has no call to ride on in this revision: it is
 * answered with an error, so the backend does not wait for ever. Closing the listen stream
 * closes the backend's GET stream. A session whose GET stream another listen holds gets a
 * -32603 error saying so (one listen per user, backend and capability set at a time).
 */
import type { FastifyReply } from 'fastify';
import type { BackendCallHeaders } from '../backends/backend.js';
import { BackendMessages, type BackendMessage } from '../backends/backend-messages.js';
import { sendJsonRpcError } from '../http/replies.js';
import { SseWriter } from '../streams/sse-writer.js';
import { ErrorCode, errorResponse, type JsonRpcId } from '../wire/jsonrpc.js';
import { META } from '../wire/revision-2026.js';
import type { LegacyForward } from './legacy-bridge.js';
import type { LegacySession } from './legacy-sessions.js';

interface Filter {
  toolsListChanged?: boolean;
  promptsListChanged?: boolean;
  resourcesListChanged?: boolean;
  resourceSubscriptions?: string[];
}

/** Which notification each filter member lets through. */
const LIST_CHANGES: ReadonlyArray<[keyof Filter, string, string]> = [
  ['toolsListChanged', 'tools', 'notifications/tools/list_changed'],
  ['promptsListChanged', 'prompts', 'notifications/prompts/list_changed'],
  ['resourcesListChanged', 'resources', 'notifications/resources/list_changed'],
];

export async function listenOnLegacyBackend(f: LegacyForward, session: LegacySession, headers: BackendCallHeaders): Promise<FastifyReply | void> {
  const { reply, id } = f;
  if (id === undefined) return reply.code(202).send();
  const asked = ((f.message.params as Record<string, unknown> | undefined)?.notifications ?? {}) as Filter;
  const honoured = honouredFilter(asked, (session.initialize.capabilities ?? {}) as Record<string, Record<string, unknown> | undefined>);
  const res = await f.backend.get(headers);
  if (res.status !== 200 || res.contentType !== 'text/event-stream') {
    await res.body.dump().catch(() => {});
    const why = res.status === 409 ? 'another subscriptions/listen of this user holds the backend session\'s stream' : `the backend answered its stream with HTTP ${res.status}`;
    return sendJsonRpcError(reply, 200, ErrorCode.InternalError, `subscriptions/listen could not be opened: ${why}`, id);
  }
  for (const uri of honoured.resourceSubscriptions ?? []) {
    const subscribed = await f.backend.post(JSON.stringify({ jsonrpc: '2.0', id: `listen-${uri}`, method: 'resources/subscribe', params: { uri } }), headers);
    await subscribed.body.dump();
  }
  f.request.mcpOutcome = 'relayed';
  reply.hijack();
  const writer = new SseWriter(reply.raw, { keepAliveMs: f.ctx.config.streams.keepAlive, headers: {} });
  const tag = (message: BackendMessage) => ({ ...message, params: { ...(message.params as object | undefined), _meta: { ...((message.params as { _meta?: object } | undefined)?._meta ?? {}), [META.subscriptionId]: id } } });
  writer.message(JSON.stringify(tag({ jsonrpc: '2.0', method: 'notifications/subscriptions/acknowledged', params: { notifications: honoured } })));
  const messages = new BackendMessages(res.body);
  writer.onClose(() => messages.close());
  for (let message = await messages.next(); message && !writer.closed; message = await messages.next()) {
    if (message.method === undefined) continue;
    if (message.id !== undefined) {
      const refusal = errorResponse(message.id as JsonRpcId, ErrorCode.MethodNotFound, `"${String(message.method)}" cannot reach a client of MCP 2026-07-28 outside a call`);
      void f.backend.post(JSON.stringify(refusal), headers).then((r) => r.body.dump(), () => {});
      continue;
    }
    if (passes(message, honoured)) writer.message(JSON.stringify(tag(message)));
  }
  if (!writer.closed) {
    writer.message(JSON.stringify({ jsonrpc: '2.0', id, result: { _meta: { [META.subscriptionId]: id } } }));
    writer.end();
  }
}

/** The subset of the client's filter the backend can serve (it announced the notification in initialize). */
function honouredFilter(asked: Filter, capabilities: Record<string, Record<string, unknown> | undefined>): Filter {
  const honoured: Filter = {};
  for (const [key, capability] of LIST_CHANGES) {
    if (asked[key] === true && capabilities[capability]?.listChanged) (honoured as Record<string, boolean>)[key] = true;
  }
  const uris = Array.isArray(asked.resourceSubscriptions) ? asked.resourceSubscriptions.filter((u) => typeof u === 'string') : [];
  if (uris.length && capabilities.resources?.subscribe) honoured.resourceSubscriptions = uris;
  return honoured;
}

function passes(message: BackendMessage, filter: Filter): boolean {
  if (message.method === 'notifications/resources/updated') {
    return filter.resourceSubscriptions?.includes(String((message.params as { uri?: unknown } | undefined)?.uri)) ?? false;
  }
  return LIST_CHANGES.some(([key, , method]) => message.method === method && filter[key] === true);
}
