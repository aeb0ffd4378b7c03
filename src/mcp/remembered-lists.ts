/**
 * Keeping the catalog (linking/catalog.ts) current from the traffic of `/mcp/{backend}`: the
 * first page of a list that a backend with `upstreamAuth` answered is read whole, offered to
 * the catalog with whose token it was obtained (the catalog keeps what it may show users who
 * have not linked, issue 28), and sent on as it came (a lone response as
 * JSON, anything sent along with it as SSE events in order). Only lists are read this way,
 * never calls: they are small, bounded and owe no resumption.
 *
 * The catalog shows the list to others, so the answer is read strictly (backends/strict-answer.ts,
 * issue 41 §1): one that is not exactly one response to the request (an id not as sent, a BOM,
 * a duplicate, a batch, two candidates, no response) is neither remembered nor served; the
 * client gets -32010 under its own id naming the backend and why.
 */
import type { FastifyReply } from 'fastify';
import type { BackendResponse } from '../backends/backend.js';
import { idKey, readStrictAnswer, unreadableError } from '../backends/strict-answer.js';
import { sendCollected } from './initialize.js';
import { isBatchText, isRequest, type JsonRpcId, type JsonRpcMessage } from '../wire/jsonrpc.js';
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
  const batch = typeof t.request.body === 'string' && isBatchText(t.request.body);
  const read = await readStrictAnswer(res, { judged: requestIds, sent: requestIds, batch });
  const response = 'unreadable' in read ? undefined : read.responses.get(idKey(requestIds[0]!));
  if ('unreadable' in read || !response) {
    const why = 'unreadable' in read ? read.unreadable : `no response to id ${JSON.stringify(requestIds[0])}`;
    return sendBackendError(t.reply, unreadableError(t.backend.name, why), requestIds, batch);
  }
  if (response.result !== undefined) await t.ctx.linking.catalog.rememberList(t.backend.config, method, response.result, provenance);
  t.reply.header(HEADER.sessionId, t.sessionId);
  return sendCollected(t.ctx, t.reply, read.parts.flatMap((part) => (part.value === undefined ? [] : [part.data])));
}
