/**
 * The provider endpoints the gateway would use for a backend with a given `upstreamAuth`:
 * through the real config parser and endpoint resolver (src/providers/provider-endpoints.ts),
 * so preset tests exercise what production does. clientId and clientSecret default to
 * test values; pass them to override.
 */
import { parseConfig } from '../../src/config/load.js';
import { createEndpointResolver, type ResolvedProvider } from '../../src/providers/provider-endpoints.js';
import { MemoryStore } from '../../src/state/memory-store.js';
import { createTokenCipher } from '../../src/state/secrets.js';

export const CLIENT_SECRET = 'sb-secret-value';

export async function resolveUpstream(upstreamAuth: Record<string, unknown>): Promise<ResolvedProvider> {
  const config = parseConfig({
    publicUrl: 'https://mcp.example.com',
    auth: { issuer: 'https://idp.example.com', audience: 'https://mcp.example.com/mcp', login: { clientId: 'switchboard-web' } },
    backends: [{ name: 'linked', url: 'https://backend.example/mcp', upstreamAuth: { clientId: 'sb-client', clientSecret: CLIENT_SECRET, ...upstreamAuth } }],
  });
  return createEndpointResolver(config, new MemoryStore(), createTokenCipher('preset-endpoints-test-key'))(config.backends[0]!);
}
