/**
 * A backend's answer with its `tools/list` results replaced by what the pins serve
 * (judge.ts). Judging reads the shared store, so unlike the tool policy's synchronous edit
 * (policy/answer-edit.ts) the answer is read whole before it is rewritten: a JSON answer is one
 * text anyway; an SSE answer to a POST that lists tools is held until it ends (its events,
 * backend event ids included, then pass in order, only the list responses rewritten). Answers
 * to other requests are not touched and not held.
 */
import type { BackendResponse } from '../backends/backend.js';
import { syntheticBody } from '../backends/body.js';
import { idKey } from '../policy/answer-edit.js';
import type { JsonRpcMessage } from '../wire/jsonrpc.js';
import { createSseReader, transformSse } from '../wire/sse.js';

export type JudgeTools = (tools: unknown[]) => Promise<unknown[]>;

/** The list response among `m` (a message or a batch), if its id is one of `listIds`. */
function listResponses(parsed: unknown, listIds: ReadonlySet<string>): JsonRpcMessage[] {
  const all = Array.isArray(parsed) ? parsed : [parsed];
  return all.filter((m): m is JsonRpcMessage => {
    if (!m || typeof m !== 'object' || Array.isArray(m)) return false;
    const msg = m as JsonRpcMessage;
    const tools = (msg.result as { tools?: unknown } | undefined)?.tools;
    return msg.method === undefined && (typeof msg.id === 'string' || typeof msg.id === 'number') && listIds.has(idKey(msg.id)) && Array.isArray(tools);
  });
}

/** Judges every list response in `parsed`, by id; returns the served tools per id. */
async function judged(parsed: unknown, listIds: ReadonlySet<string>, judge: JudgeTools, into: Map<string, unknown[]>): Promise<void> {
  for (const msg of listResponses(parsed, listIds)) {
    into.set(idKey(msg.id!), await judge((msg.result as { tools: unknown[] }).tools));
  }
}

function rewrite(parsed: unknown, served: ReadonlyMap<string, unknown[]>): unknown {
  const one = (m: unknown): unknown => {
    const msg = m as JsonRpcMessage;
    const tools = msg && typeof msg === 'object' && (typeof msg.id === 'string' || typeof msg.id === 'number') ? served.get(idKey(msg.id)) : undefined;
    return tools && msg.method === undefined ? { ...msg, result: { ...(msg.result as object), tools } } : m;
  };
  return Array.isArray(parsed) ? parsed.map(one) : one(parsed);
}

const parse = (text: string): unknown => {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
};

async function* replay(chunks: readonly Buffer[]): AsyncGenerator<Buffer> {
  yield* chunks;
}

export function editListAnswer(res: BackendResponse, listIds: ReadonlySet<string>, judge: JudgeTools): BackendResponse {
  if (!listIds.size || res.status < 200 || res.status >= 300) return res;
  const headers = { ...res.headers };
  delete headers['content-length'];
  if (res.contentType === 'application/json') {
    return {
      ...res,
      headers,
      body: syntheticBody(
        (async function* () {
          const text = await res.body.text();
          const parsed = parse(text);
          const served = new Map<string, unknown[]>();
          await judged(parsed, listIds, judge, served);
          yield served.size ? JSON.stringify(rewrite(parsed, served)) : text;
        })(),
      ),
    };
  }
  if (res.contentType !== 'text/event-stream') return res;
  return {
    ...res,
    headers,
    body: syntheticBody(
      (async function* () {
        const chunks: Buffer[] = [];
        const datas: string[] = [];
        const reader = createSseReader({ onEvent: (data) => void (data.trim() && datas.push(data)) });
        for await (const chunk of res.body) {
          chunks.push(chunk);
          reader.feed(chunk);
        }
        const served = new Map<string, unknown[]>();
        for (const data of datas) await judged(parse(data), listIds, judge, served);
        yield* transformSse(replay(chunks), (data, id) => {
          if (!served.size || !data.trim()) return { data, id };
          const parsed = parse(data);
          return { data: listResponses(parsed, listIds).length ? JSON.stringify(rewrite(parsed, served)) : data, id };
        });
      })(),
    ),
  };
}
