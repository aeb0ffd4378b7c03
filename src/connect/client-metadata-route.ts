/**
 * `GET /oauth/client-metadata.json`: the gateway's Client ID Metadata Document
 * (providers/client-metadata.ts; MCP 2025-11-25 "Authorization", §Client ID Metadata
 * Documents), which authorization servers of backends with `upstreamAuth.discover` fetch
 * when the gateway names its URL as `client_id`. Public and the same for everyone, so it
 * may be cached; served on every gateway (its `redirect_uris` are empty when no backend
 * uses discovery), so the route table is the same whatever the configuration. Made from
 * the live config on each request: a reload may add or remove a provider found by discovery.
 */
import type { FastifyInstance } from 'fastify';
import type { Config } from '../config/schema.js';
import { CLIENT_METADATA_PATH, clientMetadataDocument } from '../providers/client-metadata.js';

export function registerClientMetadataRoute(app: FastifyInstance, config: Config): void {
  app.get(CLIENT_METADATA_PATH, async (_request, reply) =>
    reply.type('application/json').header('cache-control', 'public, max-age=3600').send(JSON.stringify(clientMetadataDocument(config, `${config.publicUrl}${CLIENT_METADATA_PATH}`))),
  );
}
