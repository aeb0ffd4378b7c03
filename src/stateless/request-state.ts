/**
 * The gateway's own `requestState` (MCP 2026-07-28 "Multi Round-Trip Requests"): what lets a
 * retry prove it continues the request the gateway answered with `input_required`, on any
 * replica, without the gateway keeping anything.
 *
 * The spec makes `requestState` attacker-controlled input that must be integrity-protected when
 * it influences anything, and asks for the principal, a short expiry and a digest of the
 * original request inside it (§Server Requirements 4–5). So the state is sealed with AES-256-GCM
 * under a key derived from `secrets.tokenKey` for this purpose only (state/secrets.ts), with the
 * user key as associated data — a state copied to another user does not open — and holds the
 * expiry and a SHA-256 digest of the method and its params (without `_meta`, `inputResponses`
 * and `requestState`, which differ between the attempts by design).
 *
 * It is bound to the endpoint too (`/mcp/{backend}`, or `/mcp`): each endpoint has its own
 * access rules (`backends[].access`, checked on every request by policy/backend-guard.ts), so a
 * retry must come through the endpoint whose rules admitted the request, and be admitted by
 * them again; a state presented at another endpoint is refused (issue 28 §6: a call parked
 * through `/mcp/a` was completed through `/mcp/b`, past `/mcp/a`'s rules).
 *
 * States start with `sb1.`, so the gateway tells its own from a backend's, which pass through
 * untouched: only the gateway's are removed before a retry is forwarded.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createTokenCipher, type TokenCipher } from '../state/secrets.js';

const PREFIX = 'sb1.';
/** Long enough to sign in and approve in a browser; short enough that a leaked state soon dies. */
export const REQUEST_STATE_TTL_MS = 15 * 60_000;

/** What a sealed state remembers besides the request it belongs to. */
export interface RequestStateClaims {
  /** Why the gateway asked (e.g. `link:<provider>`). */
  purpose: string;
}

export type OpenedState = { ok: true; claims: RequestStateClaims } | { ok: false; reason: 'invalid' | 'expired' | 'other-request' | 'other-endpoint' };

/** Whom and where a state was issued to: the user (its sealing context) and the endpoint's backend name. */
export interface StateBinding {
  userKey: string;
  endpoint: string;
}

export class RequestStates {
  readonly #cipher: TokenCipher;

  constructor(tokenKey: string | undefined, private readonly now: () => number = Date.now) {
    // Without a configured key (one replica, memory store) a key of this process's own does: a
    // state then dies with the process, which costs a client one more round.
    this.#cipher = createTokenCipher(tokenKey ?? randomBytes(32).toString('base64url'), 'mrtr request-state aes-256-gcm');
  }

  /** True when the state is one the gateway issued (by its form; whether it opens is {@link open}'s business). */
  static isOurs(state: unknown): state is string {
    return typeof state === 'string' && state.startsWith(PREFIX);
  }

  seal(to: StateBinding, method: string, params: Record<string, unknown> | undefined, claims: RequestStateClaims): string {
    const body = JSON.stringify({ ...claims, exp: this.now() + REQUEST_STATE_TTL_MS, req: requestDigest(method, params), ep: to.endpoint });
    return PREFIX + this.#cipher.seal(body, `request-state:${to.userKey}`);
  }

  open(state: string, by: StateBinding, method: string, params: Record<string, unknown> | undefined): OpenedState {
    if (!state.startsWith(PREFIX)) return { ok: false, reason: 'invalid' };
    const plain = this.#cipher.open(state.slice(PREFIX.length), `request-state:${by.userKey}`);
    if (plain === undefined) return { ok: false, reason: 'invalid' };
    const body = JSON.parse(plain) as RequestStateClaims & { exp: number; req: string; ep?: string };
    if (!(body.exp > this.now())) return { ok: false, reason: 'expired' };
    // A state of an earlier release names no endpoint: refused too (the client starts again, one round more).
    if (body.ep !== by.endpoint) return { ok: false, reason: 'other-endpoint' };
    if (body.req !== requestDigest(method, params)) return { ok: false, reason: 'other-request' };
    return { ok: true, claims: { purpose: body.purpose } };
  }
}

/** The parts of a request that identify it across attempts (spec: "the method name and a digest of its salient parameters"). */
export function requestDigest(method: string, params: Record<string, unknown> | undefined): string {
  const { _meta, inputResponses, requestState, ...salient } = params ?? {};
  void _meta, void inputResponses, void requestState;
  return createHash('sha256').update(method).update('\n').update(canonicalJson(salient)).digest('base64url');
}

/** JSON with object keys sorted, so that a retry that orders its arguments differently still matches. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.keys(value as object)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonicalJson((value as Record<string, unknown>)[key])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
