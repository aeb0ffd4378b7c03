/**
 * `subscriptions/listen` of a 2026-07-28 client, for a backend of the 2025-11-25 era (issue 15,
 * "`subscriptions/listen` maps onto the backend's GET stream and `resources/subscribe`"; MCP
 * 2026-07-28 "Subscriptions").
 *
 * The listen stream is the standalone GET stream of the gateway's session with the backend
 * (legacy-sessions.ts: the same session the user's calls go through, so what those calls
 * trigger — a tool list that changed — is what this stream hears; read once per replica for
 * calls and listens alike, legacy-streams.ts), plus `resources/subscribe` for each resource
 * the client asked to follow. What the client gets:
 *
 * - first `notifications/subscriptions/acknowledged`, naming the subset honoured: the
 *   list-change types the backend announced in `initialize`, the resources only when it
 *   offers `resources.subscribe`;
 * - then the backend's notifications of those types only (the filter is the gateway's to
 *   enforce), each tagged with `_meta` `io.modelcontextprotocol/subscriptionId` (the listen
 *   request's id);
 * - when the backend ends the stream, the listen's result (the subscription's graceful end).
 *
 * The listen is also kept in this replica's open listens (streams/open-listens.ts), so a
 * `list_changed` the gateway itself causes — a pin approval, a reload that removes a member of
 * `/mcp` or changes a virtual server — reaches it, tagged the same way, when it asked for that list.
 *
 * A server→client request on that stream goes to the call running in the session
 * (legacy-streams.ts), never to a listen. Several listens share the stream; when the last one
 * closes and no call runs, the stream is closed after a while. A stream another replica holds
 * is heard through that replica (legacy-stream-shares.ts); only when no replica can give it
 * does the listen get a -32603 error saying so.
 */
import type { FastifyReply } from 'fastify';
import type { BackendMessage } from '../backends/backend-messages.js';
import { principalOf } from '../auth/authenticate.js';
import { sendJsonRpcError } from '../http/replies.js';
import { listenResultFor, listsAsked } from '../streams/open-listens.js';
import { SseWriter } from '../streams/sse-writer.js';
import { ErrorCode } from '../wire/jsonrpc.js';
import { META } from '../wire/revision-2026.js';
import type { LegacyForward } from './legacy-bridge.js';
import type { LegacySession } from './legacy-sessions.js';
import type { StreamSession } from './legacy-streams.js';

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

export async function listenOnLegacyBackend(f: LegacyForward, session: LegacySession, stream: StreamSession): Promise<FastifyReply | void> {
  const { reply, id } = f;
  if (id === undefined) return reply.code(202).send();
  const asked = ((f.message.params as Record<string, unknown> | undefined)?.notifications ?? {}) as Filter;
  const honoured = honouredFilter(asked, (session.initialize.capabilities ?? {}) as Record<string, Record<string, unknown> | undefined>);
  const tag = (message: BackendMessage) => ({ ...message, params: { ...(message.params as object | undefined), _meta: { ...((message.params as { _meta?: object } | undefined)?._meta ?? {}), [META.subscriptionId]: id } } });
  const early: BackendMessage[] = [];
  let writer: SseWriter | undefined;
  const heard = (message: BackendMessage) => {
    if (!passes(message, honoured)) return;
    if (writer) writer.message(JSON.stringify(tag(message)));
    else early.push(message);
  };
  const listening = await f.ctx.legacyStreams.listen(stream, heard);
  if (!listening.opened) {
    listening.detach();
    return sendJsonRpcError(reply, 200, ErrorCode.InternalError, 'subscriptions/listen could not be opened: the backend gave no stream for this session, and no gateway replica reads one', id);
  }
  for (const uri of honoured.resourceSubscriptions ?? []) {
    await stream.respond({ jsonrpc: '2.0', id: `listen-${uri}`, method: 'resources/subscribe', params: { uri } }).catch(() => {});
  }
  f.request.mcpOutcome = 'relayed';
  reply.hijack();
  writer = new SseWriter(reply.raw, { keepAliveMs: f.ctx.config.streams.keepAlive, headers: {} });
  writer.message(JSON.stringify(tag({ jsonrpc: '2.0', method: 'notifications/subscriptions/acknowledged', params: { notifications: honoured } })));
  for (const message of early.splice(0)) writer.message(JSON.stringify(tag(message)));
  // Heard also when the gateway changes the lists itself: a pin approval, a reload (streams/open-listens.ts).
  const end = () => {
    forget();
    if (writer!.closed) return;
    writer!.message(listenResultFor(id, id));
    writer!.end();
  };
  const forget = f.ctx.streams.listens.add({ userKey: principalOf(f.request).userKey, endpoint: f.backend.name, lists: listsAsked(honoured), subscriptionId: id, write: (m) => writer!.message(m), end });
  writer.onClose(() => {
    forget();
    listening.detach();
  });
  void listening.ended.then(end);
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
