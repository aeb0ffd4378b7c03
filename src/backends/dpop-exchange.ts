/**
 * A request to a backend with a DPoP-bound token (RFC 9449 §7): `Authorization: DPoP <token>`
 * and a fresh proof in the `DPoP` header (with `ath`, and the origin's latest nonce), signed by
 * the link's key (dpop.ts). The resource server's nonce (§9): a 401 whose `WWW-Authenticate`
 * holds a DPoP challenge with `error="use_dpop_nonce"` and a `DPoP-Nonce` is answered by one
 * retry with a new proof carrying that nonce; the nonce of any response is remembered for the
 * next request to that origin.
 *
 * Strict where it cannot read the server: a `use_dpop_nonce` challenge without one well-formed
 * `DPoP-Nonce`, or a second one after the retry, is the backend's failure (-32010), never taken
 * for a refusal of the token (which would unlink the account).
 */
import { parseWwwAuthenticate } from '../wire/www-authenticate.js';
import { headerValue } from '../wire/headers.js';
import { BackendError } from './errors.js';
import { dpopNonceFor, dpopToken, readDpopNonce, rememberDpopNonce, type DpopKey } from './dpop.js';
import type { ExchangeResponse } from './exchange.js';

/** One exchange with the given headers (the backend client's, DPoP proof included). */
export type SendWith = (headers: Record<string, string>) => Promise<ExchangeResponse>;

/**
 * Sends with a proof, and once more with the server's nonce when it asks for one.
 * `url`: the backend's URL (the proof's `htu` drops its query); `headers` carry the `DPoP`
 * authorization already.
 */
export async function dpopExchange(backend: string, key: DpopKey, method: string, url: string, headers: Record<string, string>, send: SendWith): Promise<ExchangeResponse> {
  const accessToken = dpopToken(headers.authorization!);
  const proved = async (nonce: string | undefined) => ({ ...headers, dpop: await key.proof({ htm: method, htu: url, accessToken, ...(nonce ? { nonce } : {}) }) });
  const first = await send(await proved(dpopNonceFor(url)));
  const nonce = nonceChallenge(first);
  rememberDpopNonce(url, readable(first.headers['dpop-nonce']));
  if (nonce === undefined) return first;
  await first.body.dump().catch(() => undefined);
  if (nonce === 'malformed') throw new BackendError(backend, 'protocol', `backend "${backend}" asked for a DPoP nonce (use_dpop_nonce) without one well-formed DPoP-Nonce header`, first.status);
  const second = await send(await proved(nonce));
  rememberDpopNonce(url, readable(second.headers['dpop-nonce']));
  if (nonceChallenge(second) === undefined) return second;
  await second.body.dump().catch(() => undefined);
  throw new BackendError(backend, 'protocol', `backend "${backend}" asked for a DPoP nonce again after the retry with the one it gave`, second.status);
}

/**
 * The nonce a 401 `use_dpop_nonce` challenge gives (RFC 9449 §9), `malformed` when it gives
 * none that can be read, undefined when the answer is no such challenge.
 */
function nonceChallenge(res: ExchangeResponse): string | 'malformed' | undefined {
  if (res.status !== 401) return undefined;
  const www = res.headers['www-authenticate'];
  const text = Array.isArray(www) ? www.join(', ') : www;
  if (!text || !parseWwwAuthenticate(text).some((c) => c.scheme === 'dpop' && c.params.error === 'use_dpop_nonce')) return undefined;
  return readDpopNonce(res.headers['dpop-nonce']) ?? 'malformed';
}

/** A header as undici gives it: a list of one is that one (undici lists repeated headers). */
function readable(value: string | string[] | undefined): string | string[] | undefined {
  return Array.isArray(value) && value.length === 1 ? headerValue(value) : value;
}
