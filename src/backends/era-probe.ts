/**
 * One era probe of one backend: which MCP era does it speak — 2026-07-28 (stateless, per-request
 * `_meta`) or the `initialize`-based revisions up to 2025-11-25?
 *
 * The probe is a modern request, `server/discover`, which every 2026 server MUST implement
 * (server/discover; basic/versioning §Protocol Version Negotiation). How the answer is read is
 * Transports §Backward Compatibility: a recognized modern JSON-RPC answer means a modern server
 * (a DiscoverResult; -32022 with the `supported` versions to pick from; -32020/-32021, a
 * complaint about the request only a modern server makes), anything else that refuses the
 * request (400 "no session", 404, 405, -32601, a body that is not JSON-RPC) means a legacy one.
 * Answers that say nothing about the server — 401/403 (a backend behind its users' OAuth),
 * 408/429/5xx and network failures — decide nothing, so the caller asks again later.
 */
import { createSseReader } from '../wire/sse.js';
import { ErrorCode, type JsonRpcMessage } from '../wire/jsonrpc.js';
import { LEGACY_REVISIONS, META, STATELESS_REVISION } from '../wire/revision-2026.js';
import { HEADER } from '../wire/protocol.js';
import type { BackendCaller, BackendResponse, McpBackend } from './backend.js';
import { bytesWithin } from './body.js';

/** The two eras a backend can be spoken to in (SPEC §8 `backends[].protocol`). */
export type BackendEra = '2026-07-28' | '2025-11-25';

export interface BackendEraInfo {
  era: BackendEra;
  /** The backend's own DiscoverResult, when the probe got one (server/discover "Response"). */
  discover?: Record<string, unknown>;
}

export type ProbeOutcome = { decided: BackendEraInfo; why: string } | { decided?: undefined; why: string; /** 401/403: the authorization sent (or its absence) was refused. */ refused?: boolean };

export interface ProbeOptions {
  /** Sent as the backend's `Authorization` (a backend behind the user's OAuth answers 401 without it). */
  authorization?: string;
  /** Who asks, for decorators that act for the caller (token exchange); a plain backend ignores it. */
  caller?: BackendCaller;
  timeoutMs: number;
  clientInfo: { name: string; version: string };
}

/** The JSON-RPC id of the probe, recognizable in a backend's logs. */
const PROBE_ID = 'switchboard-era-probe';
/** A DiscoverResult is small; a body past this is not one (and is not read on). */
const MAX_PROBE_BYTES = 1024 * 1024;
const LEGACY: BackendEra = '2025-11-25';
const MODERN: BackendEra = '2026-07-28';

/** Sends `server/discover` to the backend and reads its era from the answer. Never throws. */
export async function probeEra(backend: McpBackend, options: ProbeOptions): Promise<ProbeOutcome> {
  const meta = { [META.protocolVersion]: STATELESS_REVISION, [META.clientCapabilities]: {}, [META.clientInfo]: options.clientInfo };
  const body = JSON.stringify({ jsonrpc: '2.0', id: PROBE_ID, method: 'server/discover', params: { _meta: meta } });
  let res: BackendResponse | undefined;
  try {
    res = await backend.post(
      body,
      { protocolVersion: STATELESS_REVISION, protocolHeaders: { [HEADER.method]: 'server/discover' }, authorization: options.authorization, caller: options.caller },
      AbortSignal.timeout(options.timeoutMs),
    );
    return eraOfAnswer(res.status, await readAnswer(res));
  } catch (err) {
    res?.body.destroy();
    return { why: `the probe failed (${(err as Error).message})` };
  }
}

/**
 * The era an answer to a modern request shows, by Transports §Backward Compatibility. Exported
 * so that a later answer of the same backend (a stateless call refused as a legacy server
 * refuses it) can be read by the same rules.
 */
export function eraOfAnswer(status: number, answer: JsonRpcMessage | undefined): ProbeOutcome {
  if (status === 401 || status === 403) return { why: `HTTP ${status}: the backend wants authorization before it says anything`, refused: true };
  if (status === 408 || status === 429 || status >= 500) return { why: `HTTP ${status}: try again later` };
  const modern = modernAnswer(answer);
  if (modern) return modern;
  const error = answer?.error as { code?: unknown } | undefined;
  const said = error ? `JSON-RPC error ${String(error.code)}` : answer ? 'a result that is no DiscoverResult' : 'no JSON-RPC answer';
  return { decided: { era: LEGACY }, why: `HTTP ${status} with ${said}: not a 2026-07-28 server` };
}

/** The outcome when the answer is one only a modern server gives; undefined otherwise. */
function modernAnswer(answer: JsonRpcMessage | undefined): ProbeOutcome | undefined {
  if (!answer) return undefined;
  const result = answer.result;
  if (isObject(result) && Array.isArray(result.supportedVersions)) return pickFrom(result.supportedVersions, result);
  const error = answer.error as { code?: unknown; data?: { supported?: unknown } } | undefined;
  if (!isObject(error)) return undefined;
  if (error.code === ErrorCode.UnsupportedProtocolVersion && Array.isArray(error.data?.supported)) return pickFrom(error.data.supported);
  if (error.code === ErrorCode.HeaderMismatch || error.code === ErrorCode.MissingRequiredClientCapability) {
    return { decided: { era: MODERN }, why: `a 2026-07-28 error (${error.code}) to the probe itself` };
  }
  return undefined;
}

/**
 * The client's choice from the versions a modern server names (basic/versioning: "select a
 * mutually supported version"): 2026-07-28 when listed, else a legacy revision when listed.
 * With no common version either way the legacy era is chosen: its `initialize` then fails with
 * the backend's own message naming what it supports (basic/versioning §Backward Compatibility:
 * a modern-only server SHOULD), which is the diagnostic a client can show.
 */
function pickFrom(supported: unknown[], discover?: Record<string, unknown>): ProbeOutcome {
  const listed = supported.filter((v): v is string => typeof v === 'string');
  if (listed.includes(STATELESS_REVISION)) return { decided: discover ? { era: MODERN, discover } : { era: MODERN }, why: `supports ${listed.join(', ')}` };
  if (listed.some((v) => LEGACY_REVISIONS.includes(v))) return { decided: { era: LEGACY }, why: `supports ${listed.join(', ')}, not ${STATELESS_REVISION}` };
  return { decided: { era: LEGACY }, why: `no revision in common (it supports ${listed.join(', ') || 'none'})` };
}

/** The one JSON-RPC response in the body (JSON, or the first on an SSE stream), undefined for anything else. */
async function readAnswer(res: BackendResponse): Promise<JsonRpcMessage | undefined> {
  if (res.contentType === 'text/event-stream') return firstSseResponse(res);
  if (res.contentType !== 'application/json') {
    await res.body.dump();
    return undefined;
  }
  const text = await readBounded(res);
  if (text === undefined) return undefined;
  return asAnswer(text);
}

async function readBounded(res: BackendResponse): Promise<string | undefined> {
  return (await bytesWithin(res.body, MAX_PROBE_BYTES))?.toString('utf8');
}

/** Reads an SSE body only until its first response: a stream that stays open is not waited out. */
async function firstSseResponse(res: BackendResponse): Promise<JsonRpcMessage | undefined> {
  let found: JsonRpcMessage | undefined;
  const reader = createSseReader({
    onEvent: (data) => {
      if (!found && data.trim()) found = asAnswer(data);
    },
  });
  let size = 0;
  for await (const chunk of res.body) {
    size += chunk.length;
    if (size > MAX_PROBE_BYTES) break;
    reader.feed(chunk);
    if (found) break;
  }
  res.body.destroy();
  return found;
}

/** The text as a JSON-RPC response (a result or an error, no method); undefined for anything else. */
function asAnswer(text: string): JsonRpcMessage | undefined {
  try {
    const value = JSON.parse(text) as unknown;
    return isObject(value) && value.method === undefined && ('result' in value || 'error' in value) ? (value as unknown as JsonRpcMessage) : undefined;
  } catch {
    return undefined;
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
