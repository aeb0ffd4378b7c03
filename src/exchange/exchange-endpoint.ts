/**
 * Where a backend's exchange goes, and how the gateway authenticates there (SPEC §8: without
 * `tokenUrl`, the token endpoint in `auth.issuer`'s metadata).
 *
 * Client authentication follows that metadata's `token_endpoint_auth_methods_supported`
 * when the endpoint is the issuer's own: `client_secret_basic` when offered (RFC 6749
 * §2.3.1; also the default when the field is absent, RFC 8414 §2), else
 * `client_secret_post`. For an endpoint the metadata does not describe, `client_secret_basic`
 * — except with `preset: entra-obo`, whose documented request carries the secret in the body.
 *
 * The metadata is fetched once, at the first exchange (not at start: an identity provider
 * that is away then must not keep the gateway from starting). A failed fetch is tried again
 * after {@link RETRY_DISCOVERY_MS}; meanwhile a configured `tokenUrl` is used with the
 * default authentication, and a backend without one gets the failure.
 */
import { discoverIssuerMetadata, type IssuerMetadata } from '../auth/discovery.js';
import { ProviderError } from '../providers/provider-client.js';
import type { ExchangeEndpoint, TokenExchangeConfig } from './exchange-grant.js';

const RETRY_DISCOVERY_MS = 30_000;
const DISCOVERY_TIMEOUT_MS = 5_000;

type Method = ExchangeEndpoint['clientAuthentication'];

export type Discover = (issuer: string, timeoutMs: number, required: readonly string[]) => Promise<IssuerMetadata>;

export class ExchangeEndpoints {
  #metadata: IssuerMetadata | undefined;
  #pending: Promise<IssuerMetadata> | undefined;
  #failure: { at: number; message: string } | undefined;

  constructor(
    private readonly issuer: string,
    private readonly discover: Discover = discoverIssuerMetadata,
  ) {}

  /** The endpoint for one backend's `tokenExchange`; throws a ProviderError when it cannot be known now. */
  async of(x: TokenExchangeConfig): Promise<ExchangeEndpoint> {
    const metadata = await this.#issuerMetadata().catch((err: Error) => {
      if (x.tokenUrl) return undefined;
      throw new ProviderError('network', `the token endpoint could not be discovered from auth.issuer's metadata (${err.message})`);
    });
    const tokenUrl = x.tokenUrl ?? (metadata!.token_endpoint as string);
    const described = metadata && metadata.token_endpoint === tokenUrl;
    return { tokenUrl, clientAuthentication: clientAuthentication(described ? metadata : undefined, x.preset) };
  }

  #issuerMetadata(): Promise<IssuerMetadata> {
    if (this.#metadata) return Promise.resolve(this.#metadata);
    if (this.#failure && Date.now() - this.#failure.at < RETRY_DISCOVERY_MS) return Promise.reject(new Error(this.#failure.message));
    this.#pending ??= this.discover(this.issuer, DISCOVERY_TIMEOUT_MS, ['token_endpoint'])
      .then(
        (doc) => (this.#metadata = doc),
        (err: Error) => {
          this.#failure = { at: Date.now(), message: err.message };
          throw err;
        },
      )
      .finally(() => (this.#pending = undefined));
    return this.#pending;
  }
}

/** The client authentication to use, from the metadata that describes the endpoint (if any). */
export function clientAuthentication(metadata: IssuerMetadata | undefined, preset: TokenExchangeConfig['preset']): Method {
  const preferred: Method[] = preset === 'entra-obo' ? ['client_secret_post', 'client_secret_basic'] : ['client_secret_basic', 'client_secret_post'];
  if (!metadata) return preferred[0]!;
  const offered = metadata.token_endpoint_auth_methods_supported;
  // RFC 8414 §2: when omitted, the default is client_secret_basic.
  if (!Array.isArray(offered)) return 'client_secret_basic';
  return preferred.find((m) => offered.includes(m)) ?? preferred[0]!;
}
