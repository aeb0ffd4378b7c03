/**
 * The variables a `policy.rules` expression reads (issue 30 §3; docs/policy-and-audit.md):
 *
 * - `jwt`: every claim of the verified token (broker mode: the gateway's token, which carries
 *   the upstream sign-in's claims that policies read — policy-claims.ts);
 * - `mcp.method`, `mcp.backend`, `mcp.tool.name`, `mcp.tool.arguments` (the call's own
 *   arguments, at decision time), `mcp.prompt.name`, `mcp.resource.uri` — those that do not
 *   apply to the method are "" (and `{}` for arguments), so a rule about tools is simply false
 *   for a prompt instead of failing;
 * - `request.headers`: the client's HTTP headers, names lower-case, repeated ones joined with
 *   ", "; never `authorization`, `proxy-authorization` or `cookie` (credentials are not policy
 *   input, and a rule must not be able to log or compare them);
 * - `source.address`: the client's address (behind `listen.trustProxy`, from X-Forwarded-For).
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { BackendCaller } from '../backends/backend.js';
import type { Unknown } from './cel-rules.js';

const WITHHELD = new Set(['authorization', 'proxy-authorization', 'cookie']);
const EMPTY = Object.freeze({});

export interface RequestFacts {
  method: string;
  backend: string;
  tool?: string;
  arguments?: unknown;
  prompt?: string;
  uri?: string;
}

/** `request` when no rule reads it (CelRules.readsRequest): shared, nothing made per call. */
const NO_REQUEST = Object.freeze({ headers: EMPTY });

/**
 * The variables of one request. `unknown` leaves out what a listing cannot know (cel-rules.ts):
 * the arguments of a call, or the URI a resource template stands for; a rule reading it fails.
 * `readsRequest` false (no rule names `request`): its headers are not offered at all.
 */
export function policyVariables(caller: BackendCaller | undefined, facts: RequestFacts, unknown?: Unknown, readsRequest = true): Record<string, unknown> {
  const tool: Record<string, unknown> = { name: facts.tool ?? '' };
  if (unknown !== 'arguments') tool.arguments = isObject(facts.arguments) ? facts.arguments : EMPTY;
  const resource = unknown === 'uri' ? EMPTY : { uri: facts.uri ?? '' };
  return {
    jwt: caller?.principal.claims ?? EMPTY,
    mcp: { method: facts.method, backend: facts.backend, tool, prompt: { name: facts.prompt ?? '' }, resource },
    request: readsRequest ? lazyRequest(caller?.headers) : NO_REQUEST,
    source: { address: caller?.address ?? '' },
  };
}

/**
 * `request`, its `headers` made only when a rule reads them (issue 44 part 1: "build the
 * activation lazily"): most rules never do, and copying every header for each call showed in
 * the profile. An own getter, so CEL's field access (`Object.hasOwn`, then the property) finds it.
 */
function lazyRequest(headers: IncomingHttpHeaders | undefined): { readonly headers: Record<string, string> } {
  let visible: Record<string, string> | undefined;
  return {
    get headers() {
      return (visible ??= headers ? visibleHeaders(headers) : EMPTY);
    },
  };
}

function visibleHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || WITHHELD.has(name)) continue;
    out[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return !!value && typeof value === 'object' && !Array.isArray(value);
}
