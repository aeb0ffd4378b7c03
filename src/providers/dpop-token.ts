/**
 * DPoP at a token endpoint (RFC 9449 §5, §8; issue 42 cause 12): the code exchange and the
 * refresh of a link that holds a key (backends/dpop.ts) carry a proof in the `DPoP` header —
 * `htm` POST, `htu` the token endpoint without query or fragment, the origin's latest nonce.
 * The authorization server's nonce challenge — HTTP 400 `{"error":"use_dpop_nonce"}` with a
 * `DPoP-Nonce` header — is answered by one retry with a new proof carrying that nonce.
 *
 * Strict about what it cannot read: a challenge without one well-formed nonce, a second
 * challenge after the retry, a `DPoP` token the gateway did not prove a key for, and a Bearer
 * token where the backend requires DPoP-bound ones (RFC 9728 `dpop_bound_access_tokens_required`)
 * are refused as bad responses, with nothing of the request in the message.
 */
import { dpopNonceFor, readDpopNonce, rememberDpopNonce, type DpopKey } from '../backends/dpop.js';
import { ProviderError, type ProviderAnswer } from './provider-response.js';
import type { ProviderEndpoints, ProviderTokens } from './provider-client.js';

/** One POST to the token endpoint with these extra headers (the proof). */
export type PostWith = (headers: Record<string, string>) => Promise<ProviderAnswer>;

/** POSTs with a proof of `key`, and once more with the server's nonce when it asks for one. */
export async function postWithProof(url: string, key: DpopKey, post: PostWith): Promise<ProviderAnswer> {
  const proved = async (nonce: string | undefined) => ({ dpop: await key.proof({ htm: 'POST', htu: url, ...(nonce ? { nonce } : {}) }) });
  const first = await post(await proved(dpopNonceFor(url)));
  rememberDpopNonce(url, first.dpopNonce);
  if (!isNonceChallenge(first)) return first;
  const nonce = readDpopNonce(first.dpopNonce);
  if (nonce === undefined || nonce === 'malformed') {
    throw new ProviderError('bad_response', 'token endpoint asked for a DPoP nonce (use_dpop_nonce) without one well-formed DPoP-Nonce header', 'use_dpop_nonce', first.status);
  }
  const second = await post(await proved(nonce));
  rememberDpopNonce(url, second.dpopNonce);
  if (isNonceChallenge(second)) throw new ProviderError('bad_response', 'token endpoint asked for a DPoP nonce again after the retry with the one it gave', 'use_dpop_nonce', second.status);
  return second;
}

/** RFC 9449 §8: a 400 whose JSON error is `use_dpop_nonce`. */
function isNonceChallenge(res: ProviderAnswer): boolean {
  if (res.status !== 400) return false;
  try {
    const body: unknown = JSON.parse(res.text);
    return typeof body === 'object' && body !== null && (body as { error?: unknown }).error === 'use_dpop_nonce';
  } catch {
    return false;
  }
}

/**
 * The token type of an answer, checked against what was asked (RFC 9449 §5): `DPoP` only when a
 * proof was sent (normalised to `DPoP`); a Bearer token to a proved request is accepted (the
 * server chose not to bind it) unless the backend requires bound tokens.
 */
export function checkTokenType(tokens: ProviderTokens, proved: boolean, p: Pick<ProviderEndpoints, 'dpop'>): ProviderTokens {
  const dpop = tokens.tokenType.toLowerCase() === 'dpop';
  if (dpop && !proved) throw new ProviderError('bad_response', 'token endpoint issued a DPoP-bound token (token_type DPoP) the gateway did not ask for', undefined, 200);
  if (dpop) return { ...tokens, tokenType: 'DPoP' };
  if (proved && p.dpop?.boundTokensRequired) {
    throw new ProviderError('bad_response', `token endpoint issued a ${tokens.tokenType} token where the backend requires DPoP-bound tokens`, undefined, 200);
  }
  return tokens;
}
