/**
 * OAuth 2.0 Protected Resource Metadata (RFC 9728), which MCP clients read after a 401 to
 * find the authorization server (MCP 2025-11-25 "Authorization" §"Authorization Server
 * Discovery"). Each MCP endpoint is a resource of its own (resources.ts): the document at
 * `/.well-known/oauth-protected-resource/mcp[/{backend}]` names exactly the URL it was built
 * from (RFC 9728 §3.3). The root document keeps naming `auth.audience`, which every
 * endpoint accepts.
 */
import type { FastifyInstance } from 'fastify';
import type { Config } from '../config/schema.js';
import { derived } from '../config/live-config.js';
import { advertisedScopes, endpointResource, namedEndpoints } from './resources.js';

export function registerMetadataRoutes(app: FastifyInstance, config: Config): void {
  const document = (resource: string, scopes: string[]) => ({
    resource,
    // Broker mode (SPEC §8): the gateway is the authorization server its clients see.
    authorization_servers: [config.auth.mode === 'broker' ? config.publicUrl : config.auth.issuer],
    scopes_supported: scopes,
    bearer_methods_supported: ['header'],
    resource_name: 'Switchboard MCP gateway',
  });
  // Made again after a reload (config/live-config.ts): an added backend has its document at once.
  const documents = derived(config, (c) => ({
    root: document(c.auth.audience, advertisedScopes(c)),
    aggregated: document(endpointResource(c), advertisedScopes(c)),
    // Backends and virtual servers (`servers`, issue 31 §1) alike.
    perBackend: new Map(namedEndpoints(c).map((e) => [e.name, document(endpointResource(c, e.name), e.advertised)])),
  }));
  const send = { schema: undefined } as const;
  app.get('/.well-known/oauth-protected-resource', send, async () => documents().root);
  app.get('/.well-known/oauth-protected-resource/mcp', send, async () => documents().aggregated);
  app.get<{ Params: { backend: string } }>('/.well-known/oauth-protected-resource/mcp/:backend', send, async (request, reply) => {
    return documents().perBackend.get(request.params.backend) ?? reply.code(404).send({ error: 'not_found', error_description: 'no such backend' });
  });
}
