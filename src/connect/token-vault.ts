/**
 * Third-party tokens at rest (SPEC §4 step 4): one sealed value per user and provider,
 * key `vault:<userKey>:<provider>`, with the issuer of the authorization server that issued
 * them where it was discovered (a link stops being used when its backend moves to another). The whole JSON is sealed with AES-256-GCM
 * (secrets.ts) and the associated data is that same key, so a value copied under another
 * user's (or provider's) key does not open: it is then treated as absent and deleted.
 *
 * Retention: values are written with a TTL of {@link DEFAULT_RETENTION_MS} (400 days),
 * renewed by every write (each refresh rewrites the value). That is well beyond the life
 * of common refresh tokens (GitHub and Google: about 6 months unused; Microsoft: 90 days
 * sliding), so a TTL never ends a link that could still be refreshed, while tokens of
 * users who never come back do not stay in Redis forever. `retentionMs: 0` disables it.
 *
 * A link made at a server that takes DPoP (RFC 9449) also holds its key pair's private JWK
 * (`dpopKey`), sealed in the same value as the tokens.
 *
 * Nothing here logs or throws a token or a key: messages name the provider and the reason only.
 */
import type { StateStore } from '../state/store.js';
import type { TokenCipher } from '../state/secrets.js';
import type { ProviderTokens } from '../providers/provider-client.js';
import { ValueKeys } from '../state/value-keys.js';
import { isDpopPrivateJwk } from '../backends/dpop.js';

/** 400 days, in milliseconds. */
export const DEFAULT_RETENTION_MS = 400 * 24 * 60 * 60 * 1000;

const USER_KEY = /^[A-Za-z0-9_-]{1,128}$/;
const PROVIDER = /^[a-z0-9-]{1,64}$/;

export interface TokenVaultOptions {
  /** TTL of a stored value, renewed on every put; 0 = none. Default 400 days. */
  retentionMs?: number;
  log?: { warn(obj: object, msg: string): void };
}

/** The store key (and sealing context) of one user's tokens for one provider. */
export function vaultKey(userKey: string, provider: string): string {
  if (!USER_KEY.test(userKey)) throw new Error('vault: userKey must be an opaque digest ([A-Za-z0-9_-])');
  if (!PROVIDER.test(provider)) throw new Error('vault: provider must match [a-z0-9-]+');
  return ValueKeys.vault(userKey, provider);
}

export class TokenVault {
  readonly #store: StateStore;
  readonly #cipher: TokenCipher;
  readonly #retentionMs: number;
  readonly #log: TokenVaultOptions['log'];

  constructor(store: StateStore, cipher: TokenCipher, options: TokenVaultOptions = {}) {
    this.#store = store;
    this.#cipher = cipher;
    this.#retentionMs = options.retentionMs ?? DEFAULT_RETENTION_MS;
    this.#log = options.log;
  }

  /**
   * The user's tokens for the provider; undefined when none, when the value does not open,
   * or when the provider name is not a valid one. A malformed userKey throws (a bug).
   */
  async get(userKey: string, provider: string): Promise<ProviderTokens | undefined> {
    if (!PROVIDER.test(provider)) return undefined; // e.g. a provider name from a URL: nothing stored under it
    const key = vaultKey(userKey, provider);
    const sealed = await this.#store.getValue(key);
    if (sealed === undefined) return undefined;
    const tokens = parse(this.#cipher.open(sealed, key));
    if (tokens) return tokens;
    // Tampered, copied from another key, sealed with an old key, or malformed. Delete it
    // unless it changed meanwhile (a put racing with us: read-compare-delete narrows, but
    // cannot close, that window; the cost of losing it is one new elicitation).
    if ((await this.#store.getValue(key)) === sealed) await this.#store.deleteValue(key);
    this.#log?.warn({ provider }, 'stored third-party token could not be opened; deleted');
    return undefined;
  }

  async put(userKey: string, provider: string, tokens: ProviderTokens): Promise<void> {
    const key = vaultKey(userKey, provider);
    if (typeof tokens.accessToken !== 'string' || tokens.accessToken === '') throw new Error('vault: tokens need an access token');
    const record: ProviderTokens = { accessToken: tokens.accessToken, tokenType: tokens.tokenType || 'Bearer' };
    if (tokens.refreshToken) record.refreshToken = tokens.refreshToken;
    if (tokens.expiresAt !== undefined) record.expiresAt = tokens.expiresAt;
    if (tokens.scope !== undefined) record.scope = tokens.scope;
    if (tokens.issuer !== undefined) record.issuer = tokens.issuer;
    // The link's DPoP private key (RFC 9449) is sealed with its tokens, as the refresh token is.
    if (tokens.dpopKey !== undefined) record.dpopKey = tokens.dpopKey;
    const sealed = this.#cipher.seal(JSON.stringify({ v: 1, ...record }), key);
    await this.#store.putValue(key, sealed, this.#retentionMs > 0 ? this.#retentionMs : undefined);
  }

  /** Returns whether something was stored. */
  async delete(userKey: string, provider: string): Promise<boolean> {
    if (!PROVIDER.test(provider)) return false;
    return this.#store.deleteValue(vaultKey(userKey, provider));
  }
}

function parse(plain: string | undefined): ProviderTokens | undefined {
  if (plain === undefined) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(plain);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  const v = value as Record<string, unknown>;
  if (v.v !== 1 || typeof v.accessToken !== 'string' || v.accessToken === '' || typeof v.tokenType !== 'string') return undefined;
  const tokens: ProviderTokens = { accessToken: v.accessToken, tokenType: v.tokenType };
  if (typeof v.refreshToken === 'string' && v.refreshToken !== '') tokens.refreshToken = v.refreshToken;
  if (typeof v.expiresAt === 'number' && Number.isFinite(v.expiresAt)) tokens.expiresAt = v.expiresAt;
  if (typeof v.scope === 'string') tokens.scope = v.scope;
  if (typeof v.issuer === 'string') tokens.issuer = v.issuer;
  if (v.dpopKey !== undefined) {
    // A DPoP-bound link without a key it can sign with is no link: treated as absent.
    if (!isDpopPrivateJwk(v.dpopKey)) return undefined;
    tokens.dpopKey = v.dpopKey;
  }
  return tokens;
}
