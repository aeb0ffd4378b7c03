/**
 * One MCP 2026-07-28 request on the raw wire, as a stateless client sends it, and its answer
 * read whole: JSON as it is, an SSE answer by its last message (the response; notifications
 * before it are dropped). For the bridge tests that follow a call over its rounds.
 */
import { statelessHeaders } from './stateless-headers.js';

export interface StatelessAnswer {
  status: number;
  id?: unknown;
  result?: Record<string, unknown> & {
    resultType?: string;
    inputRequests?: Record<string, { method: string; params: Record<string, unknown> }>;
    requestState?: string;
    content?: Array<{ text?: string }>;
  };
  error?: { code: number; message: string; data?: Record<string, unknown> };
}

export interface StatelessCall {
  endpoint: URL;
  token: string;
  id: number;
  method?: string;
  /** The tool (tools/call), prompt or resource the request names. */
  name: string;
  capabilities?: Record<string, unknown>;
  /** More params (`inputResponses`, `requestState`, `arguments` …). */
  extra?: Record<string, unknown>;
}

/** The `_meta` of a 2026-07-28 request. */
export function statelessMeta(capabilities: Record<string, unknown>): Record<string, unknown> {
  return { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': capabilities };
}

export async function statelessCall(call: StatelessCall): Promise<StatelessAnswer> {
  const method = call.method ?? 'tools/call';
  const res = await fetch(call.endpoint, {
    method: 'POST',
    headers: statelessHeaders(call.token, method, call.name),
    body: JSON.stringify({ jsonrpc: '2.0', id: call.id, method, params: { name: call.name, arguments: {}, _meta: statelessMeta(call.capabilities ?? { elicitation: {} }), ...call.extra } }),
  });
  const text = await res.text();
  const last = res.headers.get('content-type')?.startsWith('text/event-stream') ? text.split('\n').filter((line) => line.startsWith('data: ')).at(-1)?.slice('data: '.length) : text;
  return { status: res.status, ...(JSON.parse(last ?? '{}') as Omit<StatelessAnswer, 'status'>) };
}

/** The only input request of an `input_required` answer: its key and the retry's params that answer it with `response`. */
export function answering(answer: StatelessAnswer, response: unknown): { inputResponses: Record<string, unknown>; requestState: string } {
  const keys = Object.keys(answer.result?.inputRequests ?? {});
  if (answer.result?.resultType !== 'input_required' || keys.length !== 1) throw new Error(`expected one input request, got ${JSON.stringify(answer)}`);
  return { inputResponses: { [keys[0]!]: response }, requestState: answer.result.requestState! };
}
