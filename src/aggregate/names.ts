/**
 * How the aggregated endpoint `/mcp` (SPEC §2) tells backends apart in one session. Every
 * mapping is a pure function of the name, so it survives restarts and works on any
 * replica without stored state:
 * - tools, prompts and resource templates: `{backend}__{name}`;
 * - resource URIs: `{backend}+{uri}`, which keeps a URI template a template (the backend's
 *   variables stay where they were) and reads as a scheme prefix (`everything+test://…`);
 * - ids of requests a backend sends the client (sampling, elicitation, roots):
 *   `{backend}__{JSON of the id}`, so the client's answer finds its way back.
 * Backend names match [a-z0-9-]+, so neither `__` nor `+` can occur inside one and the first
 * occurrence is always the separator.
 */
import type { JsonRpcId } from '../wire/jsonrpc.js';

const NAME_SEPARATOR = '__';
const URI_SEPARATOR = '+';

export interface Qualified<T> {
  backend: string;
  value: T;
}

export function qualifyName(backend: string, name: string): string {
  return `${backend}${NAME_SEPARATOR}${name}`;
}

export function splitName(qualified: unknown): Qualified<string> | undefined {
  if (typeof qualified !== 'string') return undefined;
  const at = qualified.indexOf(NAME_SEPARATOR);
  if (at <= 0) return undefined;
  return { backend: qualified.slice(0, at), value: qualified.slice(at + NAME_SEPARATOR.length) };
}

export function qualifyUri(backend: string, uri: string): string {
  return `${backend}${URI_SEPARATOR}${uri}`;
}

export function splitUri(qualified: unknown): Qualified<string> | undefined {
  if (typeof qualified !== 'string') return undefined;
  const at = qualified.indexOf(URI_SEPARATOR);
  if (at <= 0) return undefined;
  return { backend: qualified.slice(0, at), value: qualified.slice(at + URI_SEPARATOR.length) };
}

export function qualifyId(backend: string, id: JsonRpcId): string {
  return `${backend}${NAME_SEPARATOR}${JSON.stringify(id)}`;
}

export function splitId(qualified: unknown): Qualified<JsonRpcId> | undefined {
  const parts = splitName(qualified);
  if (!parts) return undefined;
  try {
    const id = JSON.parse(parts.value) as unknown;
    return typeof id === 'string' || typeof id === 'number' ? { backend: parts.backend, value: id } : undefined;
  } catch {
    return undefined;
  }
}
