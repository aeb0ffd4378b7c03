/**
 * One access-log line per request (issue 16; SPEC §6): when the response has been sent,
 * `request completed` with the time, request id, method and URL (query values redacted),
 * route template, backend, JSON-RPC method (or `batch`), status, duration in ms, the
 * caller's `sub` and a digest of the user key (iss+sub) — never a token. It replaces
 * Fastify's two lines per request (`incoming request` and `request completed`) and is
 * written through the root logger with its fields given, so no child logger is made for it.
 * A request that failed with an error gets the line at `error` with the error.
 */
import { LogController, type FastifyBaseLogger, type FastifyReply, type FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { redactQuery } from './logger.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The JSON-RPC method of an MCP POST (`batch` for several), for the access line. */
    rpcMethod?: string;
  }
}

/** Characters of the user key (a digest of iss+sub) the line shows: enough to tell users apart. */
const USER_DIGEST_CHARS = 16;

export class AccessLog extends LogController {
  /**
   * @param lines the logger of the access lines (logger.ts accessLoggerOptions: no redaction
   *   paths, since the line holds only fields built here); a failed request's line goes
   *   through the gateway's redacting logger instead, as it carries the error.
   */
  constructor(private readonly lines: Logger) {
    super();
  }

  override incomingRequest(): void {}

  override requestCompleted(error: Error | null, request: FastifyRequest, reply: FastifyReply): void {
    const log: FastifyBaseLogger = error ? reply.server.log : this.lines;
    const level = error ? 'error' : 'info';
    if (!(log as unknown as { isLevelEnabled(l: string): boolean }).isLevelEnabled(level)) return;
    const principal = request.principal;
    const params = request.params as { backend?: unknown } | undefined;
    const line = {
      reqId: request.id,
      req: { method: request.method, url: redactQuery(request.url), remoteAddress: request.ip },
      route: request.routeOptions.url,
      ...(typeof params?.backend === 'string' ? { backend: params.backend } : {}),
      ...(request.rpcMethod ? { rpc: request.rpcMethod } : {}),
      status: reply.statusCode,
      ms: Math.round(reply.elapsedTime * 100) / 100,
      ...(principal ? { sub: principal.sub, user: principal.userKey.slice(0, USER_DIGEST_CHARS) } : {}),
      ...(error ? { err: error } : {}),
    };
    log[level](line, 'request completed');
  }
}
