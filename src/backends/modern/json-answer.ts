/**
 * A 2026-07-28 backend's `application/json` answer to a request of a 2025-11-25 client's
 * session (issue 15, "Bridging: 2025-11-25 client → 2026 backend"; issue 29, "Streams sent as
 * JSON lines").
 *
 * - One message, small and ended soon (the usual answer): read whole and passed on as it is
 *   (held-answer.ts decides) without the members a 2025-11-25 result does not have
 *   (`resultType`, the cache hints: issue 42 §10), or, when it is an `input_required` result,
 *   answered through input-rounds.ts.
 * - Several messages one after another (JSON lines: a 2026 server may send a call's progress,
 *   then its result, in an `application/json` body), or a body that does not end soon: read
 *   message by message as they come (BackendMessages reads JSON so), through input-rounds.ts,
 *   which sends the client each notification at once and the result under its id, as the SSE
 *   answer a 2025-11-25 client takes. An `application/json` body is one message to that client
 *   (MCP 2025-11-25 "Transports" §Sending Messages to the Server), so JSON lines must not reach
 *   it as they came.
 */
import type { Readable } from 'node:stream';
import type { BackendResponse } from '../backend.js';
import { parseObject } from '../backend-messages.js';
import { syntheticBody, withBody, type BackendBody } from '../body.js';
import { holdAnswer, type HeldStream } from '../held-answer.js';
import { createJsonMessageSplitter, maySpanLines } from '../../wire/json-lines.js';
import { isInputRequired, withoutRevisionMembers, withoutRevisionMembersText } from '../../wire/result-type.js';
import { converse, type Conversation } from './input-rounds.js';

/** The client's answer to the backend's 200 `application/json` answer `res`. */
export async function answerJson(res: BackendResponse, conversation: Conversation): Promise<BackendResponse> {
  const held = await holdAnswer(res);
  if (held.stream) return converse(conversation, { res: withBody(res, streamedBody(held.stream)) });
  const text = held.whole.toString('utf8');
  if (maySpanLines(held.whole) && countMessages(held.whole) > 1) return converse(conversation, { res: withBody(res, syntheticBody(text)) });
  const method = conversation.request.method;
  const answer = conversation.shape || text.includes('"input_required"') ? parseObject(text) : undefined;
  if (!answer) return withBody(res, syntheticBody(withoutRevisionMembersText(text, method)));
  if (conversation.shape && !isInputRequired(answer.result)) return withBody(res, syntheticBody(JSON.stringify(withoutRevisionMembers(conversation.shape(answer), method))));
  return converse(conversation, { message: answer });
}

function countMessages(whole: Buffer): number {
  const splitter = createJsonMessageSplitter();
  return splitter.feed(whole).length + (splitter.end() ? 1 : 0);
}

/** The rest of a held answer as a body; destroying it gives the backend's body up at once, not at its next chunk. */
function streamedBody(stream: HeldStream): BackendBody {
  const body = syntheticBody(stream);
  (body as unknown as Readable).once('close', () => stream.destroy());
  return body;
}
