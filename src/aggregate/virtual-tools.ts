/**
 * A backend's tool as a virtual server offers it, and a client's call as the backend gets it
 * (issue 31 §1, docs/virtual-servers.md).
 *
 * The definition: offered under `as`, with the entry's `title` and `description` where given;
 * every argument the entry fixes (`value`) or hides (`hide: true`) is taken out of
 * `inputSchema.properties` and `required`. Everything else — `outputSchema`, `annotations`,
 * `_meta` (MCP Apps' `ui.resourceUri`, already qualified by rewrite.ts) — is the backend's, so a
 * renamed tool stays the same tool. `hide` is only for an optional argument: a backend whose
 * schema requires it contradicts the config, and the tool is left out (and logged, naming the
 * key) rather than offered in a form no call could satisfy.
 *
 * The call: a client value for an argument the entry fixes or hides is refused with -32602.
 * Not overridden: the advertised schema has no such argument, so a client that sends one
 * believes it chose something, and silently replacing its choice (say, the repository an
 * issue is filed in) would do what it did not ask. Echoing clients are told, by name, what to
 * leave out. Fixed values are then set on every call.
 */
import type { ToolEntry } from '../config/servers-schema.js';
import type { PromptEntry } from '../config/servers-schema.js';
import type { Selected } from './virtual-selection.js';

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Why a tool cannot be offered as configured, or its definition as the server offers it. */
export type Presented = { tool: Json } | { problem: string };

export function presentTool(selected: Selected<ToolEntry>, tool: Json): Presented {
  const { entry } = selected;
  const removed = Object.keys(entry.arguments);
  let inputSchema = tool.inputSchema;
  if (removed.length && isObject(inputSchema)) {
    const required = Array.isArray(inputSchema.required) ? (inputSchema.required as unknown[]) : [];
    const requiredHidden = removed.filter((name) => entry.arguments[name]!.hide && required.includes(name));
    if (requiredHidden.length) {
      return { problem: `${selected.key}.arguments.${requiredHidden[0]}.hide: the backend's tool "${selected.qualified}" requires this argument; hide is only for optional arguments (fix it with value instead)` };
    }
    const properties = isObject(inputSchema.properties) ? Object.fromEntries(Object.entries(inputSchema.properties).filter(([name]) => !removed.includes(name))) : inputSchema.properties;
    const left = required.filter((name) => !removed.includes(name as string));
    const { required: _required, ...rest } = inputSchema;
    void _required;
    inputSchema = { ...rest, ...(properties === undefined ? {} : { properties }), ...(left.length ? { required: left } : {}) };
  }
  const out: Json = { ...tool, name: selected.offered, ...(inputSchema === undefined ? {} : { inputSchema }) };
  if (entry.title) {
    out.title = entry.title;
    // ToolAnnotations.title is a display name too; one title, not two.
    if (isObject(tool.annotations) && 'title' in tool.annotations) out.annotations = { ...tool.annotations, title: entry.title };
  }
  if (entry.description) out.description = entry.description;
  return { tool: out };
}

export function presentPrompt(selected: Selected<PromptEntry>, prompt: Json): Json {
  const { entry } = selected;
  return { ...prompt, name: selected.offered, ...(entry.title ? { title: entry.title } : {}), ...(entry.description ? { description: entry.description } : {}) };
}

/** The arguments the backend gets, or the -32602 message when the client set one the server fixes or hides. */
export function callArguments(selected: Selected<ToolEntry>, given: unknown): { arguments: Json } | { refused: string } {
  const rules = selected.entry.arguments;
  const args: Json = isObject(given) ? { ...given } : {};
  for (const [name, rule] of Object.entries(rules)) {
    if (name in args) {
      const what = rule.hide ? 'is not offered by this server' : 'is fixed by this server';
      return { refused: `Invalid params: argument "${name}" of tool "${selected.offered}" ${what}; leave it out` };
    }
    if (!rule.hide) args[name] = rule.value;
  }
  return { arguments: args };
}
