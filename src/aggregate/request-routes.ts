/**
 * Which backend a request of the aggregated endpoint goes to, by the backend prefix of the
 * name or URI it addresses (names.ts), and the request as that backend must see it: the
 * prefix taken off, everything else as the client sent it.
 */
import type { BackendConfig } from '../config/schema.js';
import type { JsonRpcId, JsonRpcMessage } from '../wire/jsonrpc.js';
import { isToolAllowed } from '../policy/tool-policy.js';
import { splitName, splitUri } from './names.js';

export type Request = JsonRpcMessage & { id: JsonRpcId; method: string };

/** Which backend a request goes to, and the message as that backend must see it. */
export interface Route {
  backend: string;
  message: JsonRpcMessage;
  /** What the client called it, for an "unknown …" error. */
  label: string;
  /** False when policy hides the target (it must look like it does not exist). */
  visible?: (config: BackendConfig) => boolean;
}

/**
 * Where a request goes: undefined when its name/URI carries no backend prefix, null when the
 * method is not one the aggregated endpoint can route.
 */
export function routeOf(request: Request): Route | undefined | null {
  const params = (request.params ?? {}) as Record<string, unknown>;
  const byName = (label: string, visible?: Route['visible']): Route | undefined => {
    const name = splitName(params.name);
    return name && { backend: name.backend, message: { ...request, params: { ...params, name: name.value } }, label: `${label}: ${String(params.name)}`, visible };
  };
  const byUri = (): Route | undefined => {
    const uri = splitUri(params.uri);
    return uri && { backend: uri.backend, message: { ...request, params: { ...params, uri: uri.value } }, label: `resource: ${String(params.uri)}` };
  };
  switch (request.method) {
    case 'tools/call': {
      const name = splitName(params.name);
      return byName('tool', (config) => Boolean(name && isToolAllowed(config, name.value)));
    }
    case 'prompts/get':
      return byName('prompt');
    case 'resources/read':
    case 'resources/subscribe':
    case 'resources/unsubscribe':
      return byUri();
    case 'completion/complete': {
      const ref = (params.ref ?? {}) as Record<string, unknown>;
      const target = ref.type === 'ref/prompt' ? splitName(ref.name) : ref.type === 'ref/resource' ? splitUri(ref.uri) : undefined;
      if (!target) return undefined;
      const key = ref.type === 'ref/prompt' ? 'name' : 'uri';
      return { backend: target.backend, message: { ...request, params: { ...params, ref: { ...ref, [key]: target.value } } }, label: `${ref.type === 'ref/prompt' ? 'prompt' : 'resource'}: ${String(ref[key])}` };
    }
    case 'tasks/get':
    case 'tasks/result':
    case 'tasks/cancel': {
      // Task ids are qualified with the backend that created the task (extensions.ts).
      const task = splitName(params.taskId);
      return task && { backend: task.backend, message: { ...request, params: { ...params, taskId: task.value } }, label: `task: ${String(params.taskId)}` };
    }
    default:
      // An extension's method that names a qualified tool, prompt or resource goes to its backend.
      return request.method.startsWith('notifications/') ? null : (byName('name') ?? byUri() ?? null);
  }
}
