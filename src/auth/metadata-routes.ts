/**
 * OAuth 2.0 Protected Resource Metadata (RFC 9728), which MCP clients read after a 401 to
 * find the authorization server (MCP 2025-11-25 "Authorization" §"Authorization Server
 * Discovery"). `resource` is our audience: one token serves every backend path under it.
 */
import type { FastifyInstance } from 'fastify';
import type { Config } from '../config/schema.js';

export function registerMetadataRoutes(app: FastifyInstance, config: Config): void {
  const document = {
    resource: config.auth.audience,
    authorization_servers: [config.auth.issuer],
    scopes_supported: config.auth.requiredScopes,
    bearer_methods_supported: ['header'],
    resource_name: 'Switchboard MCP gateway',
  };
  const known = new Set(config.backends.map((b) => b.name));
  const send = { schema: undefined } as const;
  app.get('/.well-known/oauth-protected-resource', send, async () => document);
  app.get('/.well-known/oauth-protected-resource/mcp', send, async () => document);
  app.get<{ Params: { backend: string } }>('/.well-known/oauth-protected-resource/mcp/:backend', send, async (request, reply) => {
    if (!known.has(request.params.backend)) return reply.code(404).send({ error: 'not_found', error_description: 'no such backend' });
    const backend = config.backends.find((b) => b.name === request.params.backend)!;
    return { ...document, scopes_supported: [...new Set([...config.auth.requiredScopes, ...backend.access.scopes])] };
  });
}
