/**
 * A member's answer to a request the aggregated endpoint forwarded (`tools/call`, `prompts/get`,
 * `resources/read`, …) on its way to the client: names, URIs and server→client request ids
 * rewritten (rewrite.ts), read with the strict reader's rules (backends/strict-answer.ts,
 * issue 41 §1). The gateway rewrites what it relays, so it relays only what it can read as the
 * client will: a response carries exactly the id the member was sent (`"1"` is not `1`), once;
 * no batch (the member is sent one request); no byte-order mark; every message JSON. An answer
 * that breaks a rule becomes -32010 under the client's own id, naming the member and why.
 *
 * A JSON body is read whole (bounded), as it was before. An SSE answer stays a stream, judged
 * event by event as it arrives (a long call's progress must reach the client while it runs):
 * an unreadable event before the response ends the stream with the -32010 error as its last
 * event; one after the response (a second candidate, say) ends the stream there, the client
 * having had the one response the gateway read.
 */
import type { BackendResponse } from '../backends/backend.js';
import { syntheticBody } from '../backends/body.js';
import { BackendError } from '../backends/errors.js';
import { namingBackend, requestErrorOf } from '../backends/refused-request.js';
import { answerChecker, idKey, parseStrictly, readStrictAnswer, startsWithBom, unreadableError, writeStrictAnswer, type StrictExpectation } from '../backends/strict-answer.js';
import type { JsonRpcMessage } from '../wire/jsonrpc.js';
import { createSseReader, formatSseEvent } from '../wire/sse.js';
import type { Request } from './request-routes.js';
import { backendFailureReply, jsonResponse, sseResponse } from './responses.js';
import { messageToClient } from './rewrite.js';

/** Whose answer it is, to what, and who hears of a refusal. */
export interface MemberAnswer {
  backend: string;
  /** The request as the member got it: its id is the client's. */
  request: Request;
  /** Whether a member's notification reaches the client (a virtual server's narrowing). */
  keeps?: (backend: string, notification: JsonRpcMessage) => boolean;
  /** Told once when the answer is refused (a log line). */
  refused(error: BackendError): void;
}

const expectation = (a: MemberAnswer): StrictExpectation => ({ judged: [a.request.id], sent: [a.request.id], batch: false });

/**
 * The message as the client gets it; undefined for a notification `keeps` drops. The member's
 * error for the request names the member in `data.backend`: on `/mcp` the client cannot
 * otherwise tell whose it is (issue 42 cause 9).
 */
function toClient(a: MemberAnswer, message: JsonRpcMessage): JsonRpcMessage | undefined {
  if (message.error !== undefined && message.method === undefined && message.id === a.request.id) return namingBackend(message, a.backend);
  const rewritten = messageToClient(a.backend, message, (id) => (id === a.request.id ? a.request.method : undefined));
  const notification = typeof rewritten.method === 'string' && rewritten.id === undefined;
  return notification && a.keeps && !a.keeps(a.backend, rewritten) ? undefined : rewritten;
}

/** A JSON answer: the one response to the request, rewritten, or -32010. */
export async function jsonAnswer(res: BackendResponse, a: MemberAnswer): Promise<BackendResponse> {
  const read = await readStrictAnswer(res, expectation(a));
  if ('unreadable' in read) return refusal(a, read.unreadable);
  if (!read.responses.has(idKey(a.request.id))) return refusal(a, `no response to id ${JSON.stringify(a.request.id)}`);
  const body = writeStrictAnswer(read, (m) => toClient(a, m) ?? m);
  return { status: 200, headers: { 'content-type': 'application/json' }, body: syntheticBody(body), contentType: 'application/json' };
}

/**
 * A member's HTTP 4xx (backends/refused-request.ts `mayCarryRequestError`): its JSON-RPC error
 * for the request reaches the client as the member wrote it, in HTTP 200, with the member named
 * in `data.backend` (issue 42 cause 9); any other body is reported as the status, as before.
 */
export async function refusedAnswer(res: BackendResponse, a: MemberAnswer): Promise<BackendResponse> {
  const read = await requestErrorOf(res, a.request.id);
  if ('error' in read) return jsonResponse(toClient(a, read.error)!);
  await read.res.body.dump().catch(() => {});
  return backendFailureReply(a.request.id, new BackendError(a.backend, 'bad_status', `backend "${a.backend}" answered HTTP ${res.status}`, res.status));
}

/** An SSE answer, judged and rewritten event by event; event ids qualified `{backend}:{id}` so a resumption reaches the member. */
export function sseAnswer(res: BackendResponse, a: MemberAnswer): BackendResponse {
  return sseResponse(judgedEvents(res, a));
}

async function* judgedEvents(res: BackendResponse, a: MemberAnswer): AsyncGenerator<Buffer> {
  const check = answerChecker(expectation(a));
  let answered = false;
  let why: string | undefined;
  let out: string[] = [];
  const reader = createSseReader({
    onEvent: (data, id) => {
      if (why !== undefined) return;
      const qualifiedId = id === undefined ? undefined : `${a.backend}:${id}`;
      if (!data.trim()) {
        if (qualifiedId) out.push(formatSseEvent('', qualifiedId));
        return;
      }
      let message: JsonRpcMessage | undefined;
      try {
        const value = parseStrictly(data);
        answered = check(value).length > 0 || answered;
        message = toClient(a, value as JsonRpcMessage);
      } catch (err) {
        why = (err as Error).message;
        return;
      }
      if (message) out.push(formatSseEvent(JSON.stringify(message), qualifiedId));
      else if (qualifiedId) out.push(formatSseEvent('', qualifiedId));
    },
  });
  let head: Buffer | undefined = Buffer.alloc(0);
  try {
    for await (const piece of res.body) {
      // A gateway-made body (a 2026-07-28 member's conversation, backends/modern/) may yield text.
      const chunk: Buffer = typeof piece === 'string' ? Buffer.from(piece) : piece;
      if (head) {
        // The first bytes decide on a byte-order mark; a chunk may hold fewer than its three.
        head = Buffer.concat([head, chunk]);
        if (head.length < 3) continue;
        if (startsWithBom(head)) why = 'a byte-order mark before the body';
        else reader.feed(head);
        head = undefined;
      } else reader.feed(chunk);
      if (out.length) {
        yield Buffer.from(out.join(''));
        out = [];
      }
      if (why !== undefined) break;
    }
    // A body shorter than a byte-order mark cannot hold one.
    if (head?.length && why === undefined) {
      reader.feed(head);
      if (out.length) yield Buffer.from(out.join(''));
    }
  } finally {
    if (why !== undefined) res.body.destroy();
  }
  if (why === undefined) return;
  const error = unreadableError(a.backend, why);
  a.refused(error);
  // After the response the client has what the gateway read; nothing more of this answer reaches it.
  if (!answered) yield Buffer.from(formatSseEvent(JSON.stringify(error.rpcError(a.request.id))));
}

function refusal(a: MemberAnswer, why: string): BackendResponse {
  const error = unreadableError(a.backend, why);
  a.refused(error);
  return backendFailureReply(a.request.id, error);
}
