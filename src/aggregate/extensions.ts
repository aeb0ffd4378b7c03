/**
 * What extensions put into messages that the aggregated endpoint `/mcp` must rewrite like
 * every other name or URI (issue 18), kept in one place so that a new key is one row:
 *
 * - **Resource URIs in `_meta`** ({@link RESOURCE_URI_META_KEYS}): MCP Apps
 *   (`io.modelcontextprotocol/ui`, SEP-1865) names a tool's UI resource in
 *   `_meta.ui.resourceUri` (formerly `_meta["ui/resourceUri"]`), the OpenAI Apps SDK in
 *   `_meta["openai/outputTemplate"]`. The host reads that URI with `resources/read`, which on
 *   `/mcp` only finds the resource under its qualified URI (`{backend}+{uri}`), so these are
 *   qualified wherever a tool, a tool result or a read content carries them. Everything else
 *   in `_meta` — the UI's CSP, permissions, domain — passes through unchanged.
 * - **Task ids** (MCP 2025-11-25 "Tasks"): a task lives on the backend that created it; the
 *   client sees `{backend}__{taskId}` in `CreateTaskResult.task`, `tasks/get|cancel`
 *   results, `tasks/list` entries, `notifications/tasks/status` and the
 *   `io.modelcontextprotocol/related-task` `_meta` entry, and `tasks/get|result|cancel`
 *   are routed by that prefix — a pure function of the id, so any replica can route it.
 */
import { qualifyName, qualifyUri } from './names.js';

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Paths inside `_meta` whose string value is a URI of a resource of the same server. */
export const RESOURCE_URI_META_KEYS: ReadonlyArray<readonly string[]> = [['ui', 'resourceUri'], ['ui/resourceUri'], ['openai/outputTemplate']];

/** The `_meta` key that ties a message to a task (MCP 2025-11-25 "Tasks"). */
export const RELATED_TASK_META_KEY = 'io.modelcontextprotocol/related-task';

/** An object whose `_meta` carries resource URIs or a related task, rewritten for the client. */
export function qualifyMeta(backend: string, item: Json): Json {
  const meta = item._meta;
  if (!isObject(meta)) return item;
  let rewritten = meta;
  for (const path of RESOURCE_URI_META_KEYS) rewritten = rewriteAt(rewritten, path, (uri) => qualifyUri(backend, uri));
  const related = rewritten[RELATED_TASK_META_KEY];
  if (isObject(related) && typeof related.taskId === 'string') rewritten = { ...rewritten, [RELATED_TASK_META_KEY]: { ...related, taskId: qualifyName(backend, related.taskId) } };
  return rewritten === meta ? item : { ...item, _meta: rewritten };
}

/** A Task object (`tasks/get`, `tasks/cancel`, `tasks/list` entries, status notifications) with its id qualified. */
export function qualifyTask(backend: string, task: Json): Json {
  const withId = typeof task.taskId === 'string' ? { ...task, taskId: qualifyName(backend, task.taskId) } : task;
  return qualifyMeta(backend, withId);
}

/** Replaces the string at `path` (one or more keys deep) with `map(value)`; the same object when absent. */
function rewriteAt(object: Json, path: readonly string[], map: (value: string) => string): Json {
  const [key, ...rest] = path;
  const value = object[key!];
  if (!rest.length) return typeof value === 'string' ? { ...object, [key!]: map(value) } : object;
  if (!isObject(value)) return object;
  const inner = rewriteAt(value, rest, map);
  return inner === value ? object : { ...object, [key!]: inner };
}

/**
 * Capabilities whose value is a tree of feature flags (`tasks`, `extensions`): offered when
 * any member offers it, with every branch any member has (the first member's value where
 * two differ and neither is an object).
 */
export function mergeCapabilityTrees(into: Json, from: Json): Json {
  const merged: Json = { ...into };
  for (const [key, value] of Object.entries(from)) {
    const existing = merged[key];
    merged[key] = isObject(existing) && isObject(value) ? mergeCapabilityTrees(existing, value) : (existing ?? value);
  }
  return merged;
}
