/**
 * `Mcp-Param-{Name}` headers (MCP 2026-07-28 Transports §Custom Headers from Tool Parameters,
 * SEP-2243): a tool's `inputSchema` may mark properties with `x-mcp-header: "{Name}"`, and a
 * client of that revision MUST mirror the call's value at each marked property into a header,
 * and MUST leave out of its tool list any tool whose marks break the rules (§Schema Extension).
 *
 * Two pure steps, so that a tool's schema is read once and each call costs a walk of its marks
 * only: {@link scanParamHeaders} (the marks of one schema, or why the tool is invalid) and
 * {@link paramHeadersOf} (the headers of one call's arguments).
 */
import { encodeHeaderValue } from './header-encoding.js';
import { HEADER } from './protocol.js';

/** One mark: where the value lives in the arguments (a chain of `properties` keys), and the header's name part. */
export interface ParamHeader {
  readonly path: readonly string[];
  readonly name: string;
}

/** The marks of a valid schema (none: no headers), or the first rule the schema breaks. */
export type ParamHeaderScan = { readonly valid: true; readonly headers: readonly ParamHeader[] } | { readonly valid: false; readonly reason: string };

/** The marks of a schema without any: shared, so frozen. */
const NONE: ParamHeaderScan = Object.freeze({ valid: true, headers: Object.freeze([]) as readonly ParamHeader[] });

/** RFC 9110 §5.1 `token` (`1*tchar`): no space, control character or delimiter. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** The types a marked property may have: `number` is not permitted (§Schema Extension). */
const PRIMITIVE = new Set(['string', 'integer', 'boolean']);

/**
 * Keywords whose subschemas are not "statically reachable" through `properties` alone: a mark
 * anywhere under them makes the tool invalid. The object-valued ones map names to subschemas.
 */
const UNREACHABLE = ['items', 'prefixItems', 'contains', 'additionalProperties', 'unevaluatedProperties', 'unevaluatedItems', 'propertyNames', 'patternProperties', 'dependentSchemas', 'oneOf', 'anyOf', 'allOf', 'not', 'if', 'then', 'else', '$defs', 'definitions'] as const;
const NAME_TO_SCHEMA = new Set<string>(['patternProperties', 'dependentSchemas', '$defs', 'definitions']);

const KEY = 'x-mcp-header';

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The `x-mcp-header` marks of a tool's `inputSchema`, every constraint of §Schema Extension
 * checked: a non-empty RFC 9110 token, unique ignoring case, on a `string`, `integer` or
 * `boolean` property reached from the root through `properties` only. A schema that is not an
 * object has none.
 */
export function scanParamHeaders(inputSchema: unknown): ParamHeaderScan {
  if (!isObject(inputSchema)) return NONE;
  const found: ParamHeader[] = [];
  const lowerNames = new Map<string, string>();
  const visit = (node: unknown, path: string[], reachable: boolean): string | undefined => {
    if (!isObject(node)) return undefined;
    if (KEY in node) {
      const where = path.length ? path.join('.') : '<root>';
      if (!reachable || !path.length) return `${where}: x-mcp-header is only allowed on a property reached through "properties" alone (not under items, additionalProperties, oneOf/anyOf/allOf/not, if/then/else, $defs or $ref)`;
      const name = node[KEY];
      if (typeof name !== 'string' || !name) return `${where}: x-mcp-header must be a non-empty string`;
      if (!TOKEN.test(name)) return `${where}: x-mcp-header "${name}" is not an HTTP token (RFC 9110 §5.1)`;
      if (typeof node.type !== 'string' || !PRIMITIVE.has(node.type)) return `${where}: x-mcp-header is only allowed on a string, integer or boolean property, not ${JSON.stringify(node.type ?? null)}`;
      const prior = lowerNames.get(name.toLowerCase());
      if (prior !== undefined) return `${where}: x-mcp-header "${name}" is not unique ignoring case (also "${prior}")`;
      lowerNames.set(name.toLowerCase(), name);
      found.push({ path: [...path], name });
    }
    if (isObject(node.properties)) {
      for (const [key, child] of Object.entries(node.properties)) {
        const fault = visit(child, [...path, key], reachable);
        if (fault) return fault;
      }
    }
    for (const keyword of UNREACHABLE) {
      const sub = node[keyword];
      if (sub === undefined) continue;
      const branches = Array.isArray(sub) ? sub : NAME_TO_SCHEMA.has(keyword) && isObject(sub) ? Object.values(sub) : [sub];
      for (const branch of branches) {
        const fault = visit(branch, [...path, `<${keyword}>`], false);
        if (fault) return fault;
      }
    }
    return undefined;
  };
  const fault = visit(inputSchema, [], true);
  if (fault) return { valid: false, reason: fault };
  return found.length ? { valid: true, headers: found } : NONE;
}

/**
 * The headers one `tools/call` carries for its `arguments` (§Client Behavior, §Value
 * Encoding), names lower-cased: the value at each mark's exact path as text — a string as it
 * is, an integer in decimal, a boolean `true`/`false` — encoded where it cannot travel plain.
 * A mark whose value is absent or `null` has no header (the server must not expect one); so
 * does a value no header can carry (an object, an array, a number outside JavaScript's safe
 * integers or not finite), which the server cannot compare either.
 */
export function paramHeadersOf(marks: readonly ParamHeader[], args: unknown): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const mark of marks) {
    const text = primitiveText(valueAt(args, mark.path));
    if (text !== undefined) headers[`${HEADER.paramPrefix}${mark.name.toLowerCase()}`] = encodeHeaderValue(text);
  }
  return headers;
}

function valueAt(args: unknown, path: readonly string[]): unknown {
  let node = args;
  for (const key of path) {
    if (!isObject(node) || !Object.hasOwn(node, key)) return undefined;
    node = node[key];
  }
  return node;
}

function primitiveText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (typeof value !== 'number' || !Number.isFinite(value)) return undefined;
  if (Number.isInteger(value) && !Number.isSafeInteger(value)) return undefined;
  return String(value);
}
