/**
 * The rewriting the aggregated endpoint does to messages crossing it (SPEC §1: params and
 * results are untouched "except where routing must rewrite them"). Towards the client,
 * names and URIs gain their backend's prefix and server→client request ids become
 * backend-qualified; towards a backend, the prefix comes off again. Everything else in a
 * message, known or not, is carried over as it was.
 */
import type { JsonRpcMessage } from '../wire/jsonrpc.js';
import { qualifyMeta, qualifyTask } from './extensions.js';
import { qualifyId, qualifyName, qualifyUri, splitId } from './names.js';

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

function mapArray(value: unknown, each: (item: Json) => Json): unknown {
  return Array.isArray(value) ? value.map((item) => (isObject(item) ? each(item) : item)) : value;
}

function withKey(item: Json, key: string, map: (v: string) => string): Json {
  return typeof item[key] === 'string' ? { ...item, [key]: map(item[key] as string) } : item;
}

/** A content block (tool result, prompt message) whose resource URIs must stay readable through `/mcp`. */
function contentBlock(backend: string, block: Json): Json {
  if (block.type === 'resource_link') return withKey(block, 'uri', (u) => qualifyUri(backend, u));
  if (block.type === 'resource' && isObject(block.resource)) return { ...block, resource: withKey(block.resource, 'uri', (u) => qualifyUri(backend, u)) };
  return block;
}

/** Rewrites the result of `method` as the backend answered it. */
export function resultToClient(backend: string, method: string, result: unknown): unknown {
  if (!isObject(result)) return result;
  const meta = (item: Json) => qualifyMeta(backend, item);
  const name = (item: Json) => meta(withKey(item, 'name', (n) => qualifyName(backend, n)));
  const uri = (item: Json) => meta(withKey(item, 'uri', (u) => qualifyUri(backend, u)));
  const task = (item: Json) => qualifyTask(backend, item);
  switch (method) {
    case 'tools/list':
      return { ...result, tools: mapArray(result.tools, name) };
    case 'prompts/list':
      return { ...result, prompts: mapArray(result.prompts, name) };
    case 'resources/list':
      return { ...result, resources: mapArray(result.resources, uri) };
    case 'resources/templates/list':
      return { ...result, resourceTemplates: mapArray(result.resourceTemplates, (t) => withKey(t, 'uriTemplate', (u) => qualifyUri(backend, u))) };
    case 'resources/read':
      return { ...result, contents: mapArray(result.contents, uri) };
    case 'tools/call':
    case 'tasks/result':
      // A task-augmented call answers with CreateTaskResult; `tasks/result` with the call's result.
      return meta({ ...result, ...('content' in result ? { content: mapArray(result.content, (b) => contentBlock(backend, b)) } : {}), ...(isObject(result.task) ? { task: task(result.task) } : {}) });
    case 'tasks/get':
    case 'tasks/cancel':
      return task(result);
    case 'tasks/list':
      return { ...result, tasks: mapArray(result.tasks, task) };
    case 'prompts/get':
      return { ...result, messages: mapArray(result.messages, (m) => (isObject(m.content) ? { ...m, content: contentBlock(backend, m.content) } : m)) };
    default:
      return result;
  }
}

/**
 * A message from a backend on its way to the client. `methodOf` names the client request a
 * response answers (the dispatcher knows what it forwarded).
 */
export function messageToClient(backend: string, message: JsonRpcMessage, methodOf: (id: unknown) => string | undefined): JsonRpcMessage {
  if (typeof message.method === 'string') {
    if (message.id !== undefined && message.id !== null) {
      // A request the backend sends the client (sampling, elicitation) may belong to a task.
      const params = isObject(message.params) ? qualifyMeta(backend, message.params) : message.params;
      return { ...message, id: qualifyId(backend, message.id), ...(params === undefined ? {} : { params }) };
    }
    const params = message.params;
    if (message.method === 'notifications/resources/updated' && isObject(params)) {
      return { ...message, params: withKey(params, 'uri', (u) => qualifyUri(backend, u)) };
    }
    if (message.method === 'notifications/cancelled' && isObject(params) && (typeof params.requestId === 'string' || typeof params.requestId === 'number')) {
      // A backend cancels only requests it sent, and the client knows those by qualified id.
      return { ...message, params: { ...params, requestId: qualifyId(backend, params.requestId) } };
    }
    if (message.method === 'notifications/tasks/status' && isObject(params)) return { ...message, params: qualifyTask(backend, params) };
    const rewritten = isObject(params) ? qualifyMeta(backend, params) : params;
    return rewritten === params ? message : { ...message, params: rewritten };
  }
  if ('result' in message) {
    const method = methodOf(message.id);
    if (method) return { ...message, result: resultToClient(backend, method, message.result) };
  }
  return message;
}

/** The client's answer to a backend's request: which backend, and the id that backend used. */
export function responseToBackend(message: JsonRpcMessage): { backend: string; message: JsonRpcMessage } | undefined {
  const id = splitId(message.id);
  return id ? { backend: id.backend, message: { ...message, id: id.value } } : undefined;
}
