/**
 * Keeping the catalog (linking/catalog.ts) current from the traffic of `/mcp/{backend}`: the
 * first page of a list that a backend with `upstreamAuth` answered is read whole, offered to
 * the catalog with whose token it was obtained (the catalog keeps what it may show users who
 * have not linked, issue 28), and sent on as it came (a lone response as
 * JSON, anything sent along with it as SSE events in order). Only lists are read this way,
 * never calls: they are small, bounded (backend-body.ts) and owe no resumption.
 */
import type { FastifyReply } from 'fastify';
import type { BackendResponse } from '../backends/backend.js';
import { BackendError } from '../backends/errors.js';
import { collectMessages } from '../backends/backend-body.js';
import { sendCollected } from './initialize.js';
import { isRequest, type JsonRpcId, type JsonRpcMessage } from '../wire/jsonrpc.js';
import { HEADER } from '../wire/protocol.js';
import { sendBackendError } from '../http/replies.js';
import type { StreamTarget } from './stream-service.js';
import { CATALOG_LISTS, type Provenance } from '../linking/catalog.js';

/** The list method when the message is one first-page list request (no cursor). */
export function firstPageList(messages: readonly JsonRpcMessage[]): string | undefined {
  if (messages.length !== 1) return undefined;
  const [message] = messages;
  if (!isRequest(message!) || !(message.method in CATALOG_LISTS)) return undefined;
  const cursor = (message.params as { cursor?: unknown } | undefined)?.cursor;
  return cursor === undefined ? message.method : undefined;
}

export async function relayRememberingList(t: StreamTarget, res: BackendResponse, method: string, requestIds: readonly JsonRpcId[], provenance: Provenance): Promise<FastifyReply | void> {
  let collected;
  try {
    collected = await collectMessages(res);
  } catch (err) {
    await res.body.dump().catch(() => {});
    return sendBackendError(t.reply, new BackendError(t.backend.name, 'protocol', `backend "${t.backend.name}" sent an unreadable ${method} answer (${(err as Error).message})`), requestIds, false);
  }
  const result = collected.messages.find((m) => m.method === undefined && m.result !== undefined)?.result;
  if (result !== undefined) await t.ctx.linking.catalog.rememberList(t.backend.config, method, result, provenance);
  t.reply.header(HEADER.sessionId, t.sessionId);
  return sendCollected(t.ctx, t.reply, collected.texts);
}
