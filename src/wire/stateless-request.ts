/**
 * The checks a 2026-07-28 POST passes before anything acts on it, with the revision's codes
 * and HTTP statuses: basic/index §`_meta` ("Per-request protocol fields", -32602) and
 * §Error Codes; Transports §Request Metadata, §Value Encoding, §Server Validation (-32020);
 * basic/versioning §Protocol Version Negotiation (-32022); and the conformance suite's
 * "Methods & Routing" (404 -32601 for removed and unknown methods).
 *
 * Order, where one request fails several: a response is no 2026 message (-32600); then an
 * MCP-Protocol-Version naming a revision not served (-32022), because a client of a later
 * revision must learn what to retry with before anything else, and the body's shape may be
 * that revision's; then the method (-32601); then `_meta` (-32602); then the headers against
 * the body (-32020). The suite fixes the rest of the order: a 2026 header with `_meta`
 * lacking its protocol version is -32602, not a mismatch; a 2026 header with `_meta` naming
 * `v999.0.0` is -32020, not -32022.
 *
 * Notifications: `_meta` is optional (`NotificationParams`), and the spec leaves header rules
 * for notification POSTs undefined (Transports §Sending Messages, note), so none is required;
 * a header that is present must still agree with the body.
 */
import { decodeHeaderValue } from './header-encoding.js';
import { ErrorCode, type JsonRpcMessage } from './jsonrpc.js';
import { HEADER } from './protocol.js';
import { EXTENSION_METHODS, LOG_LEVELS, META, metaOf, nameFieldOf, REMOVED_IN_2026, STATELESS_METHODS, type LogLevel } from './revision-2026.js';

export interface StatelessRequest {
  method: string;
  /** A notification (no id): answered 202, never with a result. */
  notification: boolean;
  /** The tool or prompt name, resource URI or task id the request names (what `Mcp-Name` carries), decoded. */
  name?: string;
  protocolVersion: string;
  /** `io.modelcontextprotocol/clientCapabilities`, `{}` for a notification without it. */
  clientCapabilities: Record<string, unknown>;
  clientInfo?: { name: string; version: string; [key: string]: unknown };
  logLevel?: LogLevel;
  /** The `Mcp-Param-*` headers as sent (lower-case names, values still encoded), to pass on unchanged. */
  paramHeaders: Record<string, string>;
}

/** Why a request was refused; the route answers it as a JSON-RPC error echoing the request's id. */
export interface StatelessProblem {
  status: number;
  code: number;
  message: string;
  data?: unknown;
}

export type StatelessCheck = { ok: true; request: StatelessRequest } | { ok: false; problem: StatelessProblem };

/**
 * Request headers as Node's `IncomingMessage.rawHeaders` gives them: name and value
 * alternating, names in the case sent, a header given twice on two lines.
 */
export type RawHeaders = readonly string[];

type Fields = Pick<StatelessRequest, 'clientCapabilities' | 'clientInfo' | 'logLevel'> & { claimed?: string };

/** One standard header: its value with surrounding whitespace removed, or why it cannot be read. */
interface HeaderRead {
  value?: string;
  problem?: string;
}

interface ProtocolHeaders {
  version: HeaderRead;
  method: HeaderRead;
  name: HeaderRead;
  params: Record<string, string>;
}

export function checkStatelessRequest(headers: RawHeaders, message: JsonRpcMessage, supported: readonly string[]): StatelessCheck {
  const method = message.method;
  if (typeof method !== 'string') {
    return fail(400, ErrorCode.InvalidRequest, 'Invalid Request: MCP 2026-07-28 clients post requests and notifications only, never a JSON-RPC response');
  }
  const notification = message.id === undefined;
  const sent = readProtocolHeaders(headers);
  const meta = metaOf(message);
  const claimed = meta?.[META.protocolVersion];
  const { value: version } = sent.version;
  if (version !== undefined && !supported.includes(version) && (typeof claimed !== 'string' || claimed === version)) {
    return unsupported(version, supported);
  }
  const unknown = methodProblem(method);
  if (unknown) return { ok: false, problem: unknown };
  const fields = readMeta(message.params, notification);
  if ('problem' in fields) return { ok: false, problem: fields.problem };
  const body = bodyName(method, message.params);
  const mismatch = headerProblem(sent, method, fields.claimed, body, notification);
  if (mismatch) return fail(400, ErrorCode.HeaderMismatch, mismatch);
  const protocolVersion = (fields.claimed ?? version)!;
  if (!supported.includes(protocolVersion)) return unsupported(protocolVersion, supported);
  const request: StatelessRequest = { method, notification, protocolVersion, clientCapabilities: fields.clientCapabilities, paramHeaders: sent.params };
  if (body !== undefined) request.name = body;
  if (fields.clientInfo) request.clientInfo = fields.clientInfo;
  if (fields.logLevel) request.logLevel = fields.logLevel;
  return { ok: true, request };
}

/**
 * What `data.requiredCapabilities` of -32021 holds (schema `MissingRequiredClientCapabilityError`:
 * a `ClientCapabilities` object, e.g. `{ "sampling": {} }`): the part of `required` the client
 * did not declare, compared member by member, or undefined when all of it is declared. A
 * declared empty `elicitation` counts as `{ form: {} }` (client/elicitation §Capabilities).
 */
export function missingCapabilities(clientCapabilities: Record<string, unknown> | undefined, required: Record<string, unknown>): Record<string, unknown> | undefined {
  const declared = { ...clientCapabilities };
  if (isObject(declared.elicitation) && Object.keys(declared.elicitation).length === 0) declared.elicitation = { form: {} };
  return missingIn(declared, required);
}

function missingIn(declared: unknown, required: Record<string, unknown>): Record<string, unknown> | undefined {
  const have = isObject(declared) ? declared : {};
  let missing: Record<string, unknown> | undefined;
  for (const [key, want] of Object.entries(required)) {
    const got = have[key];
    const gap = isObject(want) ? (isObject(got) ? missingIn(got, want) : want) : got === want ? undefined : want;
    if (gap !== undefined) (missing ??= {})[key] = gap;
  }
  return missing;
}

function methodProblem(method: string): StatelessProblem | undefined {
  if (STATELESS_METHODS.has(method) || EXTENSION_METHODS.has(method)) return undefined;
  if (!REMOVED_IN_2026.has(method)) return { status: 404, code: ErrorCode.MethodNotFound, message: `Method not found: ${method}` };
  const hint = method === 'initialize' ? '; a 2025-11-25 client sends it without the 2026-07-28 MCP-Protocol-Version header and _meta, and gets a session' : '';
  return { status: 404, code: ErrorCode.MethodNotFound, message: `Method not found: ${method} was removed in MCP 2026-07-28${hint}` };
}

/** A -32602 naming the `_meta` field at fault. */
function invalid(message: string, field?: string): { problem: StatelessProblem } {
  return { problem: { status: 400, code: ErrorCode.InvalidParams, message: `Invalid params: ${message}`, ...(field ? { data: { field } } : {}) } };
}

/** The per-request `_meta` fields (basic/index §`_meta`): required on requests, typed wherever present. */
function readMeta(params: unknown, notification: boolean): Fields | { problem: StatelessProblem } {
  if (params !== undefined && !isObject(params)) return invalid('params must be an object');
  const meta = params?._meta;
  if (meta === undefined && notification) return { clientCapabilities: {} };
  if (!isObject(meta)) return invalid(`MCP 2026-07-28 requests carry params._meta with ${META.protocolVersion} and ${META.clientCapabilities}`, '_meta');
  const version = meta[META.protocolVersion];
  const capabilities = meta[META.clientCapabilities];
  const info = meta[META.clientInfo];
  const level = meta[META.logLevel];
  if (version === undefined && !notification) return invalid(`_meta lacks ${META.protocolVersion}`, META.protocolVersion);
  if (version !== undefined && (typeof version !== 'string' || version === '')) return invalid(`${META.protocolVersion} must be a non-empty string`, META.protocolVersion);
  if (capabilities === undefined && !notification) return invalid(`_meta lacks ${META.clientCapabilities}`, META.clientCapabilities);
  if (capabilities !== undefined && !isObject(capabilities)) return invalid(`${META.clientCapabilities} must be an object`, META.clientCapabilities);
  if (info !== undefined && !(isObject(info) && typeof info.name === 'string' && typeof info.version === 'string')) {
    return invalid(`${META.clientInfo} must be an object with a string name and version`, META.clientInfo);
  }
  if (level !== undefined && !(LOG_LEVELS as readonly unknown[]).includes(level)) return invalid(`${META.logLevel} must be one of ${LOG_LEVELS.join(', ')}`, META.logLevel);
  const fields: Fields = { clientCapabilities: capabilities ?? {} };
  if (version !== undefined) fields.claimed = version as string;
  if (info !== undefined) fields.clientInfo = info as Fields['clientInfo'];
  if (level !== undefined) fields.logLevel = level as LogLevel;
  return fields;
}

/** The body value `Mcp-Name` mirrors, when the method has one and the body holds it as a string. */
function bodyName(method: string, params: unknown): string | undefined {
  const field = nameFieldOf(method);
  const value = field && isObject(params) ? params[field] : undefined;
  return typeof value === 'string' ? value : undefined;
}

/**
 * Transports §Server Validation: a required standard header missing, unreadable, or not
 * equal to the body (values case-sensitive; `Mcp-Name` decoded first). Requests need
 * MCP-Protocol-Version, Mcp-Method, and Mcp-Name where the body names something.
 */
function headerProblem(sent: ProtocolHeaders, method: string, claimed: string | undefined, name: string | undefined, notification: boolean): string | undefined {
  const problem = sent.version.problem ?? sent.method.problem ?? sent.name.problem;
  if (problem) return problem;
  const { value: version } = sent.version;
  if (version === undefined && (!notification || claimed === undefined)) return 'Header mismatch: the MCP-Protocol-Version header is required';
  if (version !== undefined && claimed !== undefined && version !== claimed) return mismatch('MCP-Protocol-Version', version, claimed);
  if (sent.method.value === undefined && !notification) return 'Header mismatch: the Mcp-Method header is required';
  if (sent.method.value !== undefined && sent.method.value !== method) return mismatch('Mcp-Method', sent.method.value, method);
  if (nameFieldOf(method) === undefined) return undefined;
  const raw = sent.name.value;
  if (raw === undefined) return name === undefined ? undefined : `Header mismatch: the Mcp-Name header is required for ${method}`;
  const decoded = decodeHeaderValue(raw);
  if (decoded === undefined) return 'Header mismatch: the Mcp-Name header holds a malformed =?base64?…?= value';
  if (decoded !== name) return mismatch('Mcp-Name', decoded, name ?? '(none)');
  return undefined;
}

function mismatch(header: string, value: string, body: string): string {
  return `Header mismatch: ${header} header value ${JSON.stringify(value)} does not match body value ${JSON.stringify(body)}`;
}

/**
 * Whether a header value holds only what one may carry (RFC 9110 §5.5: visible ASCII, SP and
 * HTAB); Node hands other bytes over as Latin-1. A loop over char codes: for a value of a few
 * characters it costs a third of a regular expression's call (issue 15's bench).
 */
function isFieldContent(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if ((c < 0x20 && c !== 0x09) || c > 0x7e) return false;
  }
  return true;
}

/**
 * The standard headers, found under any capitalization (RFC 9110 §5.1: names are
 * case-insensitive), and the `Mcp-Param-*` ones, read from the header lines as sent (Node's
 * `rawHeaders`: each line once, in order — the parsed record joins repeats with a comma and
 * hides them). A standard header given more than once is refused — a router reading the first
 * and a server the last is the confusion validation prevents; a repeated parameter header is
 * joined as RFC 9110 §5.3 combines fields, for the backend to judge. A walk over a flat list,
 * without a key list or an array per header: `npm run bench`, issue 15.
 */
function readProtocolHeaders(lines: RawHeaders): ProtocolHeaders {
  const sent: SentStandard = { version: undefined, method: undefined, name: undefined };
  let params: Record<string, string> | undefined;
  for (let i = 0; i + 1 < lines.length; i += 2) {
    const key = lines[i]!;
    // Every header read here starts with `mcp`: the others (most of them) are passed over on their first letter.
    if ((key.charCodeAt(0) | 0x20) !== 0x6d) continue;
    const value = lines[i + 1]!;
    const lower = key.toLowerCase();
    const field = standardField(lower);
    if (field !== undefined) {
      sent[field] = sent[field] === undefined ? value : REPEATED;
    } else if (lower.startsWith(HEADER.paramPrefix)) {
      params ??= {};
      params[lower] = params[lower] === undefined ? value : `${params[lower]}, ${value}`;
    }
  }
  return {
    version: readStandard(sent.version, 'MCP-Protocol-Version'),
    method: readStandard(sent.method, 'Mcp-Method'),
    name: readStandard(sent.name, 'Mcp-Name'),
    params: params ?? NO_PARAMS,
  };
}

/** A standard header sent on more than one line: which value was meant does not matter, it is refused. */
const REPEATED = Symbol('repeated');

/** Each standard header as sent: its value, or {@link REPEATED}. */
interface SentStandard {
  version: string | typeof REPEATED | undefined;
  method: string | typeof REPEATED | undefined;
  name: string | typeof REPEATED | undefined;
}

/**
 * Which standard header a lower-cased name is. A `switch`, not a lookup table: a header name
 * is a fresh string on every request, and a table lookup hashes it and searches V8's string
 * table for it (about 0.1 µs a header, issue 15's bench; a `switch` compares lengths first).
 */
function standardField(lower: string): keyof SentStandard | undefined {
  switch (lower) {
    case HEADER.protocolVersion:
      return 'version';
    case HEADER.method:
      return 'method';
    case HEADER.name:
      return 'name';
    default:
      return undefined;
  }
}

/** What a request without `Mcp-Param-*` headers carries: shared, so frozen. */
const NO_PARAMS: Record<string, string> = Object.freeze({});
const NOTHING_READ: HeaderRead = Object.freeze({});

/** One standard header's value, trimmed of the white space around it (RFC 9110 §5.5), or what is wrong with it; `header` names it in the problem. */
function readStandard(given: string | typeof REPEATED | undefined, header: string): HeaderRead {
  if (given === undefined) return NOTHING_READ;
  if (given === REPEATED) return { problem: `Header mismatch: the ${header} header is given more than once` };
  const value = hasEdgeSpace(given) ? given.replace(EDGE_SPACE, '') : given;
  if (!isFieldContent(value)) return { problem: `Header mismatch: the ${header} header holds characters a header value may not carry (send them as =?base64?…?=)` };
  return { value };
}

function hasEdgeSpace(value: string): boolean {
  if (value.length === 0) return false;
  const first = value.charCodeAt(0);
  const last = value.charCodeAt(value.length - 1);
  return first === 0x20 || first === 0x09 || last === 0x20 || last === 0x09;
}

const EDGE_SPACE = /^[ \t]+|[ \t]+$/g;

function unsupported(requested: string, supported: readonly string[]): StatelessCheck {
  return fail(400, ErrorCode.UnsupportedProtocolVersion, `Unsupported protocol version: ${requested} (supported: ${supported.join(', ')})`, { supported: [...supported], requested });
}

function fail(status: number, code: number, message: string, data?: unknown): StatelessCheck {
  return { ok: false, problem: data === undefined ? { status, code, message } : { status, code, message, data } };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
