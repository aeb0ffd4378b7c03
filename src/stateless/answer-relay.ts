/**
 * A 2026-07-28 backend's answer, relayed to a 2026-07-28 client (MCP 2026-07-28
 * "Transports" §Receiving Messages, §Cancellation).
 *
 * - A JSON answer is read whole (one response, bounded by the backend's own size) and sent
 *   with its results shaped (result-shaping.ts).
 * - An SSE answer is rewritten event by event as it arrives, so progress and log
 *   notifications reach the client while the call runs: the revision has no resumption, so
 *   event ids and priming events are dropped (a client must not try `Last-Event-ID` against
 *   the gateway), and the final response is shaped.
 * - Closing the response stream is the cancellation of the request: when the client goes,
 *   the backend's body is destroyed, which closes that connection, which is the backend's
 *   cancellation signal in turn. Nothing else is sent for it.
 * - An error the backend judged the client for (a 4xx with a JSON-RPC body: invalid params,
 *   method not found, unsupported version) passes on with its status; anything else is a
 *   backend failure, mapped by the one table (backends/errors.ts).
 */
import { Readable } from 'node:stream';
import type { FastifyReply } from 'fastify';
import type { BackendResponse } from '../backends/backend.js';
import { BackendError } from '../backends/errors.js';
import { sendBackendError } from '../http/replies.js';
import type { JsonRpcId } from '../wire/jsonrpc.js';
import { transformSse, SSE_RESPONSE_HEADERS } from '../wire/sse.js';
import { shapeMessageBytes, shapeMessageText } from './result-shaping.js';

export interface StatelessAnswer {
  backend: string;
  /** The method the client called: which results are cacheable. */
  method: string;
  /** The client's request id, or undefined for a notification. */
  id: JsonRpcId | undefined;
  /** Whether the backend's `"public"` cache scope may stand (result-shaping.ts). */
  shared: boolean;
}

export async function relayStatelessAnswer(reply: FastifyReply, res: BackendResponse, answer: StatelessAnswer): Promise<FastifyReply | void> {
  const ok = res.status >= 200 && res.status < 300;
  if (res.status === 202 && answer.id === undefined) {
    await res.body.dump();
    return reply.code(202).send();
  }
  if (ok && res.contentType === 'application/json') {
    const bytes = await res.body.bytes();
    // Not `return reply`: an async function that returns the reply makes every caller's await
    // adopt it as a thenable, two more turns each (npm run bench, issue 15).
    reply.code(200).type('application/json').send(shapeMessageBytes(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength), answer.method, answer.shared));
    return;
  }
  if (ok && res.contentType === 'text/event-stream') return relayEvents(reply, res, answer);
  if (res.status >= 400 && res.status < 500 && res.status !== 401 && res.status !== 403 && res.contentType === 'application/json') {
    return reply.code(res.status).type('application/json').send(await res.body.text());
  }
  await res.body.dump().catch(() => {});
  const failure = new BackendError(answer.backend, 'bad_status', `backend "${answer.backend}" answered HTTP ${res.status}`, res.status);
  return sendBackendError(reply, failure, answer.id === undefined ? [] : [answer.id], false);
}

function relayEvents(reply: FastifyReply, res: BackendResponse, answer: StatelessAnswer): FastifyReply {
  // The client leaving is the request's cancellation: stop reading, which closes the backend's
  // connection. (The response's `close`, not the request's: that one fires once the body is read.)
  const cancel = () => {
    if (!reply.raw.writableFinished) res.body.destroy();
  };
  reply.raw.once('close', cancel);
  const events = transformSse(res.body, (data) => {
    if (data === '') return undefined;
    return { data: shapeMessageText(data, answer.method, answer.shared) };
  });
  const body = Readable.from(events, { objectMode: false });
  body.once('close', () => reply.raw.off('close', cancel));
  return reply
    .code(200)
    .headers(SSE_RESPONSE_HEADERS)
    .send(body);
}
